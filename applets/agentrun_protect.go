package applets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// The protect control on the host side (DESIGN §16 rule 11): at start the
// run host finds which protected paths the workspace has, resolves the git
// directory a .git file points to, and hands the plan plain facts
// (policy.WorkspaceProtect); BuildPlan turns them into mounts. Without
// mounts (iso landlock, iso shared) the writable rules are decomposed
// around them instead (policy.ProtectAccess, over the directories this
// file reads): Landlock rules in the plan, or write rules ctx-confine
// applies. When the run ends it looks again and reports what the run
// created, moved or replaced where it could not be stopped: a mount needs
// an existing file to cover, and ctx leaves no placeholder of its own in
// the caller's directory.

// Bounds of the search for **/ entries: breadth first, so the projects
// nearest the top are found first; past the bound the line in
// /mnt/proc/policy and a warning say so.
const (
	maxProtectWalkDirs = 20000
	maxProtectPaths    = 1024
)

// protectState is what one run's start found, kept for the end.
type protectState struct {
	wp      policy.WorkspaceProtect
	watched []watchedPath
	found   []string // what the end of the run found changed
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
	entries []policy.ProtectDirEntry
	err     error
}

// watchedPath is a protected path (or an absent top-level one) and what
// stood there when the run started.
type watchedPath struct {
	rel     string
	present bool
	dev     uint64
	ino     uint64
	mode    uint32 // S_IFMT bits
}

// protectGather is the search in progress.
type protectGather struct {
	ws        string          // the canonical workspace on the host
	mounts    map[string]bool // mount points below it: not in the sandbox
	set       []policy.ProtectPattern
	paths     []string             // protected, relative to ws
	gitDirs   []policy.GitDirMount // outside the workspace
	worktrees []string             // sandbox paths of work trees whose git directory is outside
	notes     []string
	truncated bool
	// noMounts: iso landlock or shared, where the agent sees the host's
	// paths, so a git directory is where the .git file leads on the host;
	// shared: iso shared, where the agent reaches every path of its uid
	// anyway, so a .git file's git directory is protected wherever it is.
	noMounts bool
	shared   bool
}

// gatherProtect finds the protected set of this run and returns its lines
// for /mnt/proc/policy. A protected path that is a symlink refuses the
// start: a mount cannot keep the agent from replacing a symlink, and
// following it would protect, or show, whatever it points to.
func (r *agentRun) gatherProtect() ([]string, error) {
	a := r.agent
	g := &protectGather{ws: r.workspace, set: policy.EffectiveProtect(a.Protect),
		noMounts: r.iso == policy.IsoLandlock || r.iso == policy.IsoShared, shared: r.iso == policy.IsoShared}
	if err := g.walk(); err != nil {
		return nil, fmt.Errorf("%v; %s", err, protectEscape(a.Name))
	}
	st := &protectState{wp: policy.WorkspaceProtect{Paths: g.paths, GitDirs: g.gitDirs}}
	var absent []string
	for _, rel := range g.paths {
		st.watched = append(st.watched, watch(g.ws, rel))
	}
	for _, p := range g.set {
		if g.protected(p.Path) {
			continue
		}
		w := watch(g.ws, p.Path)
		if !w.present {
			absent = append(absent, p.Path)
		}
		st.watched = append(st.watched, w)
	}
	r.protect = st

	var lines []string
	switch {
	case g.noMounts:
		ll, err := r.protectLandlockLines(g, absent)
		if err != nil {
			return nil, err
		}
		lines = append(lines, ll...)
	case !a.Ceiling.Has(policy.CeilingWrite):
		lines = append(lines, "workspace read-only (perm has no w): every protected path with it")
	case len(g.paths) > 0:
		lines = append(lines, "workspace protect "+strings.Join(g.paths, " ")+" (read-only)")
	default:
		lines = append(lines, "workspace protect none present")
	}
	if len(absent) > 0 && a.Ceiling.Has(policy.CeilingWrite) && !g.noMounts {
		lines = append(lines, "workspace protect absent "+strings.Join(absent, " ")+
			" (not blocked: nothing to mount on; the end of the run reports any it created)")
	}
	for _, d := range g.gitDirs {
		if g.noMounts {
			break // protectLandlockLines names them
		}
		at := " at its own path"
		if d.Sandbox != d.Host {
			at = " at " + d.Sandbox + ", where the .git file leads"
		}
		lines = append(lines, "workspace protect git directory "+d.Host+" (read-only, outside the workspace,"+at+")")
	}
	var removed []string
	for _, e := range a.Protect {
		if e.Remove {
			removed = append(removed, e.String())
		}
	}
	if len(removed) > 0 {
		lines = append(lines, "workspace protect taken out by agent/"+a.Name+".d/protect: "+strings.Join(removed, " "))
	}
	if g.truncated {
		lines = append(lines, fmt.Sprintf("workspace protect search stopped after %d directories or %d paths: deeper **/ paths are not protected", maxProtectWalkDirs, maxProtectPaths))
	}
	for _, n := range g.notes {
		lines = append(lines, "workspace protect note: "+n)
	}
	// In uid mode the outside git directory keeps its owner (only the
	// workspace is idmapped), and git refuses a repository whose git
	// directory another uid owns unless told the work tree is safe. It
	// is read-only to the agent, so trusting it changes nothing.
	if r.iso == policy.IsoUID && len(g.worktrees) > 0 && !hasEnv(r.env, "GIT_CONFIG_COUNT") {
		r.env = append(r.env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(g.worktrees)))
		for i, w := range g.worktrees {
			r.env = append(r.env, fmt.Sprintf("GIT_CONFIG_KEY_%d=safe.directory", i), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, w))
		}
		lines = append(lines, "workspace protect git safe.directory "+strings.Join(g.worktrees, " ")+" (GIT_CONFIG_*: the git directory keeps its host owner)")
	}
	return lines, nil
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

// protected reports whether rel is a protected path or lies inside one.
func (g *protectGather) protected(rel string) bool {
	for _, p := range g.paths {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// walk looks for every pattern at the top of the workspace and, for **/
// patterns, below every directory, breadth first. It never follows a
// symlink, never descends into a protected path, a .git directory or
// another mount (the workspace is bound without its submounts, so those
// are not in the sandbox). A directory costs one readdir: a pattern is
// looked at only when its first component is among the entries.
func (g *protectGather) walk() error {
	anyDepth := false
	for _, p := range g.set {
		anyDepth = anyDepth || p.AnyDepth
	}
	if table, err := fsops.MountTable(); err == nil {
		g.mounts = map[string]bool{}
		for _, m := range table {
			if m.Target != g.ws && within(m.Target, g.ws) {
				g.mounts[m.Target] = true
			}
		}
	}
	queue := []string{""}
	for visited := 0; len(queue) > 0; visited++ {
		if visited >= maxProtectWalkDirs {
			g.truncated = true
			return nil
		}
		dir := queue[0]
		queue = queue[1:]
		entries, err := os.ReadDir(filepath.Join(g.ws, dir))
		if err != nil {
			continue // unreadable to the caller: not the agent's either
		}
		names := make(map[string]bool, len(entries))
		for _, en := range entries {
			names[en.Name()] = true
		}
		for _, p := range g.set {
			if dir != "" && !p.AnyDepth {
				continue
			}
			first, _, _ := strings.Cut(p.Path, "/")
			if !names[first] {
				continue
			}
			if err := g.match(filepath.Join(dir, p.Path)); err != nil {
				return err
			}
			if len(g.paths) >= maxProtectPaths {
				g.truncated = true
				return nil
			}
		}
		if !anyDepth {
			return nil
		}
		for _, en := range entries {
			if !en.IsDir() || en.Name() == ".git" { // IsDir is false for a symlink
				continue
			}
			rel := filepath.Join(dir, en.Name())
			if g.protected(rel) || !g.sameMount(rel) {
				continue
			}
			queue = append(queue, rel)
		}
	}
	return nil
}

// sameMount reports whether rel is on the workspace's own mount: no mount
// point lies at or above it inside the workspace.
func (g *protectGather) sameMount(rel string) bool {
	for p := filepath.Join(g.ws, rel); p != g.ws && len(p) > len(g.ws); p = filepath.Dir(p) {
		if g.mounts[p] {
			return false
		}
	}
	return true
}

// match protects rel when it exists: a symlink anywhere on the way refuses
// the start; a .git file brings its git directory.
func (g *protectGather) match(rel string) error {
	if g.protected(rel) {
		return nil
	}
	host := filepath.Join(g.ws, rel)
	st, err := fsops.StatNoSymlinks(host)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return g.symlinkOnTheWay(rel)
		}
		return nil // absent (or unreadable to the caller, so not the agent's either)
	}
	if !g.sameMount(rel) {
		g.notes = append(g.notes, rel+" is on another mount, which the sandbox does not show")
		return nil
	}
	g.addPath(rel)
	if filepath.Base(rel) == ".git" && st.Mode&unix.S_IFMT == unix.S_IFREG {
		g.gitFile(rel)
	}
	return nil
}

// symlinkOnTheWay names the symlink that stands at or above rel.
func (g *protectGather) symlinkOnTheWay(rel string) error {
	cur := ""
	for _, c := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, c)
		st, err := os.Lstat(filepath.Join(g.ws, cur))
		if err == nil && st.Mode()&fs.ModeSymlink != 0 {
			to, _ := os.Readlink(filepath.Join(g.ws, cur))
			if cur == rel {
				return fmt.Errorf("protected path %s is a symlink (to %q)", rel, to)
			}
			return fmt.Errorf("protected path %s: %s is a symlink (to %q)", rel, cur, to)
		}
	}
	return fmt.Errorf("protected path %s: a symlink on the way", rel)
}

// addPath records rel as protected, dropping protected paths inside it.
func (g *protectGather) addPath(rel string) {
	if g.protected(rel) {
		return
	}
	kept := g.paths[:0]
	for _, p := range g.paths {
		if !strings.HasPrefix(p, rel+"/") {
			kept = append(kept, p)
		}
	}
	g.paths = append(kept, rel)
	sort.Strings(g.paths)
}

// gitFile follows a protected .git file (a linked worktree's or a
// submodule's) to its git directory, on the host, and protects that too:
// in place when it lies inside the workspace (a submodule of the
// workspace's repository), else, for a linked worktree, bound read-only
// where the file's path leads inside the sandbox, so git works there. An
// outside directory is shown only when it leads back to this workspace
// (the worktree's gitdir back-link names this .git file): a .git file
// written in an earlier run must not open an unrelated host directory to
// the agent. A submodule's git directory outside the workspace is not
// shown: git finds that submodule's work tree through its superproject's
// paths, which the sandbox does not have; start the agent in the
// superproject instead.
func (g *protectGather) gitFile(rel string) {
	host := filepath.Join(g.ws, rel)
	data, err := readSmallNoFollow(host)
	if err != nil {
		g.notes = append(g.notes, rel+": "+err.Error())
		return
	}
	written, err := policy.ParseGitFile(data)
	if err != nil {
		g.notes = append(g.notes, rel+": not a git file: "+err.Error())
		return
	}
	target, inSandbox := written, filepath.Clean(written)
	if !filepath.IsAbs(written) {
		target = filepath.Join(filepath.Dir(host), written)
		inSandbox = filepath.Join(policy.SandboxWorkspace, filepath.Dir(rel), written)
	}
	// Notes name the path as the file wrote it, never what it resolves
	// to, and say the same whether it exists or not: the file may be an
	// earlier run's, asking about the host.
	notShown := func(why string) {
		g.notes = append(g.notes, rel+": its git directory "+strconv.Quote(written)+" is not shown: "+why)
	}
	gitdir, err := filepath.EvalSymlinks(target)
	if err != nil {
		notShown(notBack)
		return
	}
	common := gitdir
	if b, err := readSmallNoFollow(filepath.Join(gitdir, "commondir")); err == nil {
		if c, err := policy.ParseGitPathFile(b); err == nil {
			if !filepath.IsAbs(c) {
				c = filepath.Join(gitdir, c)
			}
			if real, err := filepath.EvalSymlinks(c); err == nil && within(gitdir, real) {
				common = real
			}
		}
	}
	if r, ok := g.inside(gitdir); ok {
		g.addPath(r)
		if r, ok := g.inside(common); ok {
			g.addPath(r)
		}
		return
	}
	if g.shared {
		// iso shared hides nothing: whatever the file leads to, if it is
		// a git directory, host git would run its hooks.
		if !isGitDir(common) {
			g.notes = append(g.notes, rel+": "+strconv.Quote(written)+" is not a git directory: nothing to protect there")
			return
		}
		g.addGitDir(policy.GitDirMount{Host: common, Sandbox: common})
		return
	}
	if !g.pointsBack(host, gitdir) {
		notShown(notBack)
		return
	}
	if g.noMounts {
		// iso landlock: the git directory is read where the file leads,
		// on the host; a rule makes it readable, none writable.
		g.addGitDir(policy.GitDirMount{Host: common, Sandbox: common})
		return
	}
	m := policy.GitDirMount{Host: gitdir, Sandbox: inSandbox}
	if common != gitdir {
		if _, ok := g.inside(common); !ok {
			// The common directory holds the worktree's objects and
			// refs; the worktree's own directory lies inside it.
			sub, _ := filepath.Rel(common, gitdir)
			base, ok := strings.CutSuffix(inSandbox, "/"+sub)
			if !ok {
				notShown("its common directory is not where its path leads")
				return
			}
			m = policy.GitDirMount{Host: common, Sandbox: base}
		}
	}
	if err := policy.GitDirTargetAllowed(m.Sandbox); err != nil {
		notShown(err.Error())
		return
	}
	g.addGitDir(m)
	g.worktrees = append(g.worktrees, filepath.Join(policy.SandboxWorkspace, filepath.Dir(rel)))
}

// isGitDir reports whether dir looks like a git directory: HEAD, objects
// and refs, as git itself checks.
func isGitDir(dir string) bool {
	for _, n := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return true
}

// notBack is why a .git file's git directory outside the workspace is not
// shown.
const notBack = "it does not lead back to this workspace (a submodule's is reached through its superproject: start the agent there)"

// inside returns p relative to the workspace when p lies in it.
func (g *protectGather) inside(p string) (string, bool) {
	if !within(p, g.ws) {
		return "", false
	}
	r, err := filepath.Rel(g.ws, p)
	return r, err == nil && r != "."
}

// pointsBack checks a worktree's back-link: the "gitdir" file of its git
// directory names the .git file at host (absolutely, or relative to the
// git directory).
func (g *protectGather) pointsBack(host, gitdir string) bool {
	b, err := readSmallNoFollow(filepath.Join(gitdir, "gitdir"))
	if err != nil {
		return false
	}
	back, err := policy.ParseGitPathFile(b)
	if err != nil {
		return false
	}
	if !filepath.IsAbs(back) {
		back = filepath.Join(gitdir, back)
	}
	real, err := filepath.EvalSymlinks(back)
	return err == nil && real == host
}

// addGitDir records an outside directory to show, once.
func (g *protectGather) addGitDir(m policy.GitDirMount) {
	for _, d := range g.gitDirs {
		if d == m {
			return
		}
		if within(m.Sandbox, d.Sandbox) || within(d.Sandbox, m.Sandbox) {
			g.notes = append(g.notes, "git directory "+m.Host+" is not shown: "+m.Sandbox+" overlaps "+d.Sandbox)
			return
		}
	}
	g.gitDirs = append(g.gitDirs, m)
}

// within reports whether p is dir or below it, by whole components.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// readSmallNoFollow reads a small regular file without following a
// symlink in its last component.
func readSmallNoFollow(p string) ([]byte, error) {
	// Never open what is not a regular file (a FIFO would block, a device
	// could act); O_NOFOLLOW and the check after opening close the race.
	if st, err := os.Lstat(p); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	return fsops.ReadLimited(f, p, 8192)
}

// watch records what stands at rel now.
func watch(ws, rel string) watchedPath {
	w := watchedPath{rel: rel}
	if st, err := fsops.Lstat(filepath.Join(ws, rel)); err == nil {
		w.present, w.dev, w.ino, w.mode = true, st.Dev, st.Ino, st.Mode&unix.S_IFMT
	}
	return w
}

// protectReport is the end of the run's look at the protected paths: one
// line per path the run created (absent at start), moved or replaced
// (a nested protected path's directory can be renamed), or removed. The
// sandbox is gone by now, so nothing of the run changes them any more.
func (r *agentRun) protectReport() []string {
	if r.protect == nil || !r.agent.Ceiling.Has(policy.CeilingWrite) {
		return nil
	}
	var out []string
	for _, w := range r.protect.watched {
		now := watch(r.workspace, w.rel)
		switch {
		case !w.present && now.present:
			out = append(out, "created "+w.rel)
		case w.present && !now.present:
			out = append(out, "removed "+w.rel)
		case w.present && (now.dev != w.dev || now.ino != w.ino || now.mode != w.mode):
			out = append(out, "replaced "+w.rel)
		}
	}
	return out
}

// warnProtect looks at the protected paths once the run is over and
// prints what it changed that the mounts could not stop; protectDetail
// gives the same for the agent.stop event.
func (r *agentRun) warnProtect(e *Env) {
	if r.protect == nil {
		return
	}
	if r.protect.rulesFile != "" {
		os.Remove(r.protect.rulesFile) // ctx-confine's, if it did not get to it
	}
	r.protect.found = r.protectReport()
	if len(r.protect.found) > 0 {
		cli.Errorf(e.Stderr, "ctx agent", "%s: protect: this run %s in the workspace %s: host tools may load these by themselves; check them before they do",
			r.agent.Name, strings.Join(r.protect.found, ", "), r.workspace)
	}
}

func (r *agentRun) protectDetail() string {
	if r.protect == nil || len(r.protect.found) == 0 {
		return ""
	}
	return "protect: " + strings.Join(r.protect.found, ", ")
}

// ---- under Landlock: iso landlock and iso shared ----

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
// leaves the workspace writable whole, and the end of the run reports a
// protected path it created, as in the namespace modes.
func (r *agentRun) protectLandlockLines(g *protectGather, absent []string) ([]string, error) {
	st := r.protect
	shared := r.iso == policy.IsoShared
	if !shared && !r.agent.Ceiling.Has(policy.CeilingWrite) {
		// The workspace rule is read-only: nothing to decompose; a git
		// directory outside is still read through its own rule.
		lines := []string{"workspace read-only (perm has no w): every protected path with it"}
		for _, d := range g.gitDirs {
			lines = append(lines, "workspace protect git directory "+d.Host+" (read-only, outside the workspace: a Landlock read rule)")
		}
		return lines, nil
	}
	for _, rel := range g.paths {
		st.targets = append(st.targets, filepath.Join(g.ws, rel))
	}
	blocked := len(g.paths) > 0
	if blocked {
		for _, rel := range absent {
			st.targets = append(st.targets, filepath.Join(g.ws, rel))
		}
	}
	for _, d := range g.gitDirs {
		st.targets = append(st.targets, d.Host)
	}
	mode := "Landlock"
	if shared {
		mode = "Landlock, iso shared"
		if abi, err := fsops.LandlockABI(); abi == 0 && len(st.targets) > 0 {
			st.targets = nil
			return []string{"workspace protect not enforced: iso shared without Landlock (" + err.Error() +
				"); protected paths the run creates or changes are reported when it ends"}, nil
		}
	}
	var lines []string
	if len(g.paths) > 0 {
		lines = append(lines, "workspace protect "+strings.Join(g.paths, " ")+" (read-only: "+mode+")")
	} else {
		lines = append(lines, "workspace protect none present")
	}
	if len(absent) > 0 {
		if blocked {
			lines = append(lines, "workspace protect absent "+strings.Join(absent, " ")+
				" (cannot be created: Landlock lets no entry be made in a directory on the way to a protected path)")
		} else {
			lines = append(lines, "workspace protect absent "+strings.Join(absent, " ")+
				" (not blocked: nothing in the workspace is protected, so Landlock leaves it writable whole; the end of the run reports any it created)")
		}
	}
	for _, d := range g.gitDirs {
		how := "a Landlock read rule"
		if shared {
			how = "no Landlock write rule"
		}
		lines = append(lines, "workspace protect git directory "+d.Host+" (read-only, outside the workspace: "+how+")")
	}
	if len(st.targets) == 0 {
		return lines, nil
	}
	// The decomposition the run will have: from the workspace in iso
	// landlock (its other writable places are decomposed with the plan,
	// on the same listings), from / in iso shared.
	root := policy.AccessRule{Path: g.ws, Write: true, Exec: true}
	if shared {
		root = policy.AccessRule{Path: "/", Write: true}
	}
	d, err := policy.ProtectAccess([]policy.AccessRule{root}, st.targets, st.list)
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
	lines = append(lines, fmt.Sprintf("workspace protect landlock: %d write rules %s beside the protected paths; no entry can be created, removed or renamed directly in %s (the files there stay writable in place, the directories writable whole)",
		d.WriteRules, where, r.protectShow(d.Chain, shared)))
	if len(d.Unlisted) > 0 {
		lines = append(lines, "workspace protect note: could not list "+r.protectShow(d.Unlisted, shared)+": their entries are read-only for the run")
	}
	return lines, nil
}

// protectShow names directories for a policy line: relative to the
// workspace ("." its top) in iso landlock, absolute in iso shared, at
// most maxProtectShown of them.
func (r *agentRun) protectShow(dirs []string, abs bool) string {
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

// list is the policy.ProtectLister of the run: each directory read once,
// without following a symlink at its end, and no further than one entry
// past the bound (which refuses it).
func (st *protectState) list(dir string) ([]policy.ProtectDirEntry, error) {
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

func readProtectDir(dir string) ([]policy.ProtectDirEntry, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []policy.ProtectDirEntry
	for len(out) <= policy.MaxProtectDirEntries {
		batch, err := f.ReadDir(512)
		for _, e := range batch {
			out = append(out, policy.ProtectDirEntry{Name: e.Name(), Dir: e.IsDir(), Symlink: e.Type()&fs.ModeSymlink != 0})
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
func (r *agentRun) protectLandlockPlan() error {
	if r.protect == nil || len(r.protect.targets) == 0 {
		return nil
	}
	_, err := policy.ProtectLandlock(r.plan, r.protect.targets, r.protect.list)
	return err
}

// protectShared prepares iso shared's protection: the write rules go to
// a file of the caller's runtime directory that ctx-confine applies
// (fsops.ConfineLandlockEnv) and removes; the lines, with no policy file
// in this mode, go to the agent.start event.
func (r *agentRun) protectShared(lines []string) error {
	st := r.protect
	st.startNote = strings.Join(lines, "; ")
	if len(st.targets) == 0 || r.planOnly {
		return nil
	}
	st.rulesFile = filepath.Join(r.runtime, "protect-"+r.runID)
	if err := fsops.WriteConfineRules(st.rulesFile, st.sharedRules); err != nil {
		return fmt.Errorf("protect: %v", err)
	}
	r.env = append(r.env, fsops.ConfineLandlockEnv+"="+st.rulesFile)
	return nil
}

// protectEventNote is iso shared's protection for the agent.start event:
// the run has no policy file to state it.
func (r *agentRun) protectEventNote() string {
	if r.protect == nil || r.protect.startNote == "" {
		return ""
	}
	return " " + r.protect.startNote
}
