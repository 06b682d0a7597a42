package runhost

import (
	"fmt"
	"path/filepath"
	"strings"

	"ctx/fsops"
	"ctx/fsops/protectsearch"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// The protect control on the host side (DESIGN §16 rule 11): at start the
// run host finds which protected paths the workspace has, resolves the git
// directory a .git file points to, and hands the plan plain facts
// (sandboxplan.WorkspaceProtect); BuildPlan turns them into mounts. Without
// mounts (iso landlock, iso shared) the writable rules are decomposed
// around them instead (sandboxplan.ProtectAccess, over the directories this
// file reads): Landlock rules in the plan, or write rules ctx-confine
// applies. When the run ends it looks again and reports what the run
// created, moved or replaced where it could not be stopped: a mount needs
// an existing file to cover, and ctx leaves no placeholder of its own in
// the caller's directory.

// protectState is what one run's start found, kept for the end.
type protectState struct {
	wp sandboxplan.WorkspaceProtect
	// The census of the protected paths at start (what they held), and
	// what it needs to be taken again at the end.
	set    []policy.ProtectPattern
	mounts map[string]bool
	start  *fsops.ProtectCensus
	found  []string // what the end of the run found and did
	// Under Landlock (iso landlock, iso shared): the host paths kept
	// read-only, the directories listed for it (one snapshot for the
	// policy lines and the plan), and in iso shared the write rules
	// ctx-confine applies, their file and the lines for agent.start.
	targets     []string
	listed      map[string]protectListing
	sharedRules []string
	rulesFile   string
	startNote   string
}

// protectListing is one directory as the start read it.
type protectListing struct {
	entries []sandboxplan.ProtectDirEntry
	err     error
}

// gatherProtect finds the protected set of this run and returns its lines
// for /mnt/proc/policy. A protected path that is a symlink refuses the
// start: a mount cannot keep the agent from replacing a symlink, and
// following it would protect, or show, whatever it points to.
func (r *AgentRun) gatherProtect() ([]string, error) {
	a := r.Agent
	table, _ := r.mounts.Read()
	g := &protectsearch.Search{Workspace: r.workspace, Set: policy.EffectiveProtect(a.Protect), Table: table,
		NoMounts: r.iso == policy.IsoLandlock || r.iso == policy.IsoShared, Shared: r.iso == policy.IsoShared}
	if err := g.Walk(); err != nil {
		return nil, fmt.Errorf("%v; %s", err, protectEscape(a.Name))
	}
	st := &protectState{wp: sandboxplan.WorkspaceProtect{Paths: g.Paths, GitDirs: g.GitDirs}, set: g.Set, mounts: g.Mounts}
	var absent []string
	for _, p := range g.Set {
		if _, err := fsops.Lstat(filepath.Join(g.Workspace, p.Path)); err != nil && !g.Protected(p.Path) {
			absent = append(absent, p.Path)
		}
	}
	if a.Ceiling.Has(policy.CeilingWrite) {
		st.start = fsops.TakeProtectCensus(g.Workspace, g.Set, g.Mounts, true, g.Known)
	}
	r.protect = st

	var lines []string
	if g.NoMounts {
		ll, err := r.protectLandlockLines(g, absent)
		if err != nil {
			return nil, err
		}
		lines = append(lines, ll...)
	} else {
		lines = append(lines, protectMountLines(a, g, absent)...)
	}
	lines = append(lines, protectNoteLines(a, g)...)
	// In uid mode the outside git directory keeps its owner (only the
	// workspace is idmapped), and git refuses a repository whose git
	// directory another uid owns unless told the work tree is safe. It
	// is read-only to the agent, so trusting it changes nothing.
	if r.iso == policy.IsoUID && len(g.Worktrees) > 0 && !hasEnv(r.env, "GIT_CONFIG_COUNT") {
		r.env = append(r.env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(g.Worktrees)))
		for i, w := range g.Worktrees {
			r.env = append(r.env, fmt.Sprintf("GIT_CONFIG_KEY_%d=safe.directory", i), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, w))
		}
		lines = append(lines, "workspace protect git safe.directory "+strings.Join(g.Worktrees, " ")+" (GIT_CONFIG_*: the git directory keeps its host owner)")
	}
	return lines, nil
}

// protectMountLines are the /mnt/proc/policy lines of a run whose
// protected paths are read-only mounts (iso userns, uid): what is
// protected, what is absent and so not blocked, and the git directories
// outside the workspace.
func protectMountLines(a *policy.Agent, g *protectsearch.Search, absent []string) []string {
	var lines []string
	switch {
	case !a.Ceiling.Has(policy.CeilingWrite):
		lines = append(lines, "workspace read-only (perm has no w): every protected path with it")
	case len(g.Paths) > 0:
		lines = append(lines, "workspace protect "+strings.Join(g.Paths, " ")+" (read-only)")
	default:
		lines = append(lines, "workspace protect none present")
	}
	if len(absent) > 0 && a.Ceiling.Has(policy.CeilingWrite) {
		lines = append(lines, "workspace protect absent "+strings.Join(absent, " ")+
			" (not blocked: nothing to mount on; the end of the run moves aside any it created)")
	}
	for _, d := range g.GitDirs {
		at := " at its own path"
		if d.Sandbox != d.Host {
			at = " at " + d.Sandbox + ", where the .git file leads"
		}
		lines = append(lines, "workspace protect git directory "+d.Host+" (read-only, outside the workspace,"+at+")")
	}
	return lines
}

// protectNoteLines are the /mnt/proc/policy lines of every mode about
// the search itself: entries the agent's control took out, a search cut
// short, and the notes it left.
func protectNoteLines(a *policy.Agent, g *protectsearch.Search) []string {
	var lines []string
	var removed []string
	for _, e := range a.Protect {
		if e.Remove {
			removed = append(removed, e.String())
		}
	}
	if len(removed) > 0 {
		lines = append(lines, "workspace protect taken out by agent/"+a.Name+".d/protect: "+strings.Join(removed, " "))
	}
	if g.Truncated {
		lines = append(lines, fmt.Sprintf("workspace protect search stopped after %d directories or %d paths: deeper **/ paths are not protected", protectsearch.MaxWalkDirs, protectsearch.MaxPaths))
	}
	for _, n := range g.Notes {
		lines = append(lines, "workspace protect note: "+n)
	}
	return lines
}

// protectEscape is the way out of a refused start the error names.
func protectEscape(agent string) string {
	return "ctx neither follows nor protects a symlink; replace it with what it points to, or take the entry out with a ! line in agent/" + agent + ".d/protect (ctx man sandbox)"
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}
