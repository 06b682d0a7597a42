package runhost

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops/protectsearch"
	"ctx/fsops/sandbox"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// The protect control under Landlock, in the runs without mounts (iso
// landlock, iso shared): a protected path cannot be covered by a
// read-only mount, so the writable rules are decomposed around it
// (sandboxplan.ProtectAccess) on the directories as the start lists them.

// maxProtectShown bounds the directories a policy line names.
const maxProtectShown = 64

// protectLandlockLines decides what Landlock keeps read-only in a run
// without mounts, checks that it can be done (the decomposition is
// computed once here, on the directories as they are now, so a chain
// directory with too many entries refuses the start before anything is
// written), and returns the lines for the run's policy. The targets are
// the protected paths present, the git directories a .git file leads
// to, and, once anything in the workspace is protected (so its top
// already grants no new entry), the absent top-level paths of the set:
// none of them can then be created. With nothing present, Landlock
// leaves the workspace writable whole, and the end of the run moves aside a
// protected path it created, as in the namespace modes.
func (r *AgentRun) protectLandlockLines(g *protectsearch.Search, absent []string) ([]string, error) {
	st := r.protect
	shared := r.iso == policy.IsoShared
	if !shared && !r.Agent.Ceiling.Has(policy.CeilingWrite) {
		// The workspace rule is read-only: nothing to decompose; a git
		// directory outside is still read through its own rule.
		lines := []string{"workspace read-only (perm has no w): every protected path with it"}
		for _, d := range g.GitDirs {
			lines = append(lines, "workspace protect git directory "+d.Host+" (read-only, outside the workspace: a Landlock read rule)")
		}
		return lines, nil
	}
	blocked := st.addTargets(g, absent)
	mode := "Landlock"
	if shared {
		mode = "Landlock, iso shared"
		if abi, err := sandbox.LandlockABI(); abi == 0 && len(st.targets) > 0 {
			st.targets = nil
			return []string{"workspace protect not enforced: iso shared without Landlock (" + err.Error() +
				"); protected paths the run creates or changes are reported when it ends"}, nil
		}
	}
	var lines []string
	if len(g.Paths) > 0 {
		lines = append(lines, "workspace protect "+strings.Join(g.Paths, " ")+" (read-only: "+mode+")")
	} else {
		lines = append(lines, "workspace protect none present")
	}
	if len(absent) > 0 {
		if blocked {
			lines = append(lines, "workspace protect absent "+strings.Join(absent, " ")+
				" (cannot be created: Landlock lets no entry be made in a directory on the way to a protected path)")
		} else {
			lines = append(lines, "workspace protect absent "+strings.Join(absent, " ")+
				" (not blocked: nothing in the workspace is protected, so Landlock leaves it writable whole; the end of the run moves aside any it created)")
		}
	}
	for _, d := range g.GitDirs {
		how := "a Landlock read rule"
		if shared {
			how = "no Landlock write rule"
		}
		lines = append(lines, "workspace protect git directory "+d.Host+" (read-only, outside the workspace: "+how+")")
	}
	if len(st.targets) == 0 {
		return lines, nil
	}
	dl, err := r.protectDecompose(g.Workspace, shared)
	if err != nil {
		return nil, err
	}
	return append(lines, dl...), nil
}

// addTargets sets what Landlock keeps read-only: the protected paths
// present, the git directories outside, and, when anything in the
// workspace is protected (blocked), the absent top-level paths too.
func (st *protectState) addTargets(g *protectsearch.Search, absent []string) (blocked bool) {
	for _, rel := range g.Paths {
		st.targets = append(st.targets, filepath.Join(g.Workspace, rel))
	}
	blocked = len(g.Paths) > 0
	if blocked {
		for _, rel := range absent {
			st.targets = append(st.targets, filepath.Join(g.Workspace, rel))
		}
	}
	for _, d := range g.GitDirs {
		st.targets = append(st.targets, d.Host)
	}
	return blocked
}

// protectDecompose computes the decomposition the run will have, from
// the workspace ws in iso landlock (its other writable places are
// decomposed with the plan, on the same listings), from / in iso shared
// (whose write rules it keeps for ctx-confine), and returns its lines. A
// directory on the way that cannot be decomposed refuses the start.
func (r *AgentRun) protectDecompose(ws string, shared bool) ([]string, error) {
	st := r.protect
	root := sandboxplan.AccessRule{Path: ws, Write: true, Exec: true}
	if shared {
		root = sandboxplan.AccessRule{Path: "/", Write: true}
	}
	d, err := sandboxplan.ProtectAccess([]sandboxplan.AccessRule{root}, st.targets, st.list)
	if err != nil {
		return nil, err
	}
	if shared {
		for _, a := range d.Access {
			if a.Write {
				st.sharedRules = append(st.sharedRules, a.Path)
			}
		}
	}
	where := "from the workspace"
	if shared {
		where = "from /"
	}
	lines := []string{fmt.Sprintf("workspace protect landlock: %d write rules %s beside the protected paths; no entry can be created, removed or renamed directly in %s (the files there stay writable in place, the directories writable whole)",
		d.WriteRules, where, r.protectShow(d.Chain, shared))}
	if len(d.Unlisted) > 0 {
		lines = append(lines, "workspace protect note: could not list "+r.protectShow(d.Unlisted, shared)+": their entries are read-only for the run")
	}
	return lines, nil
}

// protectShow names directories for a policy line: relative to the
// workspace ("." its top) in iso landlock, absolute in iso shared, at
// most maxProtectShown of them.
func (r *AgentRun) protectShow(dirs []string, abs bool) string {
	var out []string
	for i, d := range dirs {
		if i == maxProtectShown {
			out = append(out, fmt.Sprintf("(and %d more)", len(dirs)-i))
			break
		}
		if !abs && within(d, r.workspace) {
			if d, _ = filepath.Rel(r.workspace, d); d == "" {
				d = "."
			}
		}
		out = append(out, d)
	}
	return strings.Join(out, " ")
}

// list is the sandboxplan.ProtectLister of the run: each directory read once,
// without following a symlink at its end, and no further than one entry
// past the bound (which refuses it).
func (st *protectState) list(dir string) ([]sandboxplan.ProtectDirEntry, error) {
	if l, ok := st.listed[dir]; ok {
		return l.entries, l.err
	}
	if st.listed == nil {
		st.listed = map[string]protectListing{}
	}
	entries, err := readProtectDir(dir)
	st.listed[dir] = protectListing{entries, err}
	return entries, err
}

func readProtectDir(dir string) ([]sandboxplan.ProtectDirEntry, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []sandboxplan.ProtectDirEntry
	for len(out) <= sandboxplan.MaxProtectDirEntries {
		batch, err := f.ReadDir(512)
		for _, e := range batch {
			out = append(out, sandboxplan.ProtectDirEntry{Name: e.Name(), Dir: e.IsDir(), Symlink: e.Type()&fs.ModeSymlink != 0})
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// protectLandlockPlan applies the protection to an iso landlock plan:
// every writable rule holding a protected path is decomposed, on the
// listings the start read.
func (r *AgentRun) protectLandlockPlan() error {
	if r.protect == nil || len(r.protect.targets) == 0 {
		return nil
	}
	_, err := sandboxplan.ProtectLandlock(r.plan, r.protect.targets, r.protect.list)
	return err
}

// protectShared prepares iso shared's protection: the write rules go to
// a file of the caller's runtime directory that ctx-confine applies
// (sandbox.ConfineLandlockEnv) and removes; the lines, with no policy file
// in this mode, go to the agent.start event.
func (r *AgentRun) protectShared(lines []string) error {
	st := r.protect
	st.startNote = strings.Join(lines, "; ")
	if len(st.targets) == 0 || r.planOnly {
		return nil
	}
	st.rulesFile = filepath.Join(r.runtime, "protect-"+r.RunID)
	if err := sandbox.WriteConfineRules(st.rulesFile, st.sharedRules); err != nil {
		return fmt.Errorf("protect: %v", err)
	}
	r.env = append(r.env, sandbox.ConfineLandlockEnv+"="+st.rulesFile)
	return nil
}

// protectEventNote is iso shared's protection for the agent.start event:
// the run has no policy file to state it.
func (r *AgentRun) protectEventNote() string {
	if r.protect == nil || r.protect.startNote == "" {
		return ""
	}
	return " " + r.protect.startNote
}
