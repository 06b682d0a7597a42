package sandboxplan

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"

	"ctx/policy"
)

// An iso landlock run has no mount to show its home at /home/agent, so
// HOME is the home's host directory, home/UID/agent/NAME, which also
// holds what the host keeps for the agent (HomeHeldDirs). Landlock only
// grants, and a right on a directory reaches everything beneath it, so
// the home's top cannot be writable while session/ is not by Landlock
// alone. What Landlock can withhold is REMOVE_DIR (AccessRule.KeepDirs):
// then no directory beneath can be removed or renamed, and the held
// directories stay where they are; writing, creating and removing in
// them is then left to their owner and mode, which must keep the agent's
// uid out. That holds where root started the run (the run host makes
// them root's, the agent has a uid of its own), not where a user's agent
// runs as the user.

// HomeHeldDirs are the directories of an agent's home that the host keeps:
// its run directories, its session history and its skills (its
// instructions). The agent may neither change nor move them.
var HomeHeldDirs = []string{"run", "session", "skills"}

// HomeWritableDirs are the directories of the home every iso landlock run
// may write whole.
var HomeWritableDirs = []string{"data", "cache", "log", "root", "tmp"}

// HomeTop lets an iso landlock run write its home's top: new entries
// beside the held directories (dotfiles, ~/.config, ~/.npm), though no
// directory there can be removed or renamed, and every directory the
// home already holds but the held ones writable whole.
type HomeTop struct {
	// Dirs are the home's directories writable whole (host paths):
	// HomeWritableDirs and every other directory of the home but the held
	// ones, so what an earlier run made there is the agent's entirely.
	Dirs []string
}

// LandlockHomeTop decides whether an iso landlock run of agent a may write
// its home's top. entries are the facts (lstat) of the home's own entries,
// skills those of everything in skills/, complete false when that walk
// stopped early. It returns the grant, or nil and why not (for the run's
// policy account).
func LandlockHomeTop(a *policy.Agent, home string, entries, skills []policy.FileFacts, complete bool) (*HomeTop, string) {
	switch {
	case !a.Ceiling.Has(policy.CeilingWrite):
		return nil, "perm has no w"
	case a.UID == 0:
		return nil, "the agent runs as uid 0"
	case !complete:
		return nil, path.Join(home, "skills") + " holds too many entries to check"
	}
	byName := map[string]policy.FileFacts{}
	for _, f := range entries {
		byName[path.Base(f.Path)] = f
	}
	for _, d := range HomeHeldDirs {
		f, ok := byName[d]
		if !ok {
			return nil, path.Join(home, d) + " does not exist"
		}
		if why := heldProblem(a, f); why != "" {
			return nil, why
		}
		if !f.Mode.IsDir() {
			return nil, f.Path + " is not a directory"
		}
	}
	for _, f := range skills {
		if why := heldProblem(a, f); why != "" {
			return nil, why
		}
	}
	t := &HomeTop{}
	for _, d := range HomeWritableDirs {
		t.Dirs = append(t.Dirs, path.Join(home, d))
	}
	for _, f := range entries {
		name := path.Base(f.Path)
		if f.Mode&fs.ModeType != fs.ModeDir || slices.Contains(HomeHeldDirs, name) || slices.Contains(HomeWritableDirs, name) {
			continue
		}
		t.Dirs = append(t.Dirs, path.Join(home, name))
	}
	sort.Strings(t.Dirs)
	return t, ""
}

// heldProblem says why the agent could change f, a held directory or an
// entry of skills/, by its owner and mode; "" when it cannot.
func heldProblem(a *policy.Agent, f policy.FileFacts) string {
	switch bits, _ := policy.ModeClass(a, &f); {
	case f.Mode&fs.ModeSymlink != 0:
		return f.Path + " is a symlink"
	case f.UID == a.UID:
		return fmt.Sprintf("%s is owned by the agent's uid %d", f.Path, a.UID)
	case bits.Has(policy.CeilingWrite):
		return fmt.Sprintf("%s (mode %04o owner %d:%d) is writable by the agent", f.Path, uint32(f.Mode.Perm()), f.UID, f.GID)
	}
	return ""
}
