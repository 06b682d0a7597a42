package toolchain

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"ctx/fsops/proc"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// A program from a version manager is rarely one file: nvm's npm is a
// link into the version's lib, a pipx tool a link into its venv whose #!
// line names a python elsewhere, a pyenv shim a script that picks the
// version when it runs. Before a start the run host walks that chain in
// the sandbox's view (proc.ProgramChain: links and #! lines read, never
// run) and finds every directory the start needs that the sandbox does
// not show.

// A Check is what was found of a run's program.
type Check struct {
	Name    string // as the person gave it
	World   string // its path in the sandbox
	ByPATH  bool   // found by the sandbox's PATH, but not shown there
	Yours   bool   // found only by the caller's PATH
	Top     bool   // its own path is not shown (a hop of it)
	Chain   proc.Chain
	Unshown []proc.Hop // the hops of its chain the sandbox does not show
	Shim    bool       // a shim whose tree is not shown
	Trees   []string   // the trees of known managers' shims on its chain the sandbox does not show (Managers.ShimTrees)
	EnvHost string     // where the caller's PATH has the program its #! line runs by PATH, which the sandbox's has not
	Dirs    []string   // the directories to show, read-only at their own paths
}

// CheckProgram walks the chain of name, a run's program, found as the
// sandbox of plan would find it (by sandboxPATH for a bare name; else by
// hostPATH, the caller's, to say where it is); nil when there is nothing
// to say: all of it is shown, or what is missing is missing on the host
// too (left to the sandbox, whose init names it). home is the caller's,
// never shown whole; m says where the managers of the shim table keep
// their homes.
func CheckProgram(plan *sandboxplan.Plan, name, sandboxPATH, hostPATH string, m Managers) *Check {
	home := m.Home
	look := LookPath(plan, sandboxPATH)
	c := &Check{Name: name}
	switch {
	case name == "":
		return nil
	case filepath.IsAbs(name):
		c.World = filepath.Clean(name)
	case strings.Contains(name, "/"):
		c.World = filepath.Join(plan.Cwd, name)
	default:
		if c.World = look(name); c.World == "" {
			if c.World = LookPathIn(name, hostPATH); c.World == "" {
				return nil
			}
			c.Yours = true
		}
		c.ByPATH = !c.Yours
	}
	view := View(plan)
	if !IsExecutableFile(view(c.World)) {
		return nil
	}
	c.Chain = proc.ProgramChain(c.World, view, look)
	c.Unshown = unshownHops(plan, c.Chain)
	for _, h := range c.Unshown {
		c.Top = c.Top || h.Path == c.World
	}
	c.ByPATH = c.ByPATH && c.Top
	c.Shim = c.Chain.Shim != "" && ShownAt(plan, c.Chain.Shim) == ""
	c.Trees = m.chainTrees(plan, c.Chain)
	if c.Chain.EnvName != "" {
		if c.EnvHost = LookPathIn(c.Chain.EnvName, hostPATH); c.EnvHost != "" {
			c.Unshown = append(c.Unshown, unshownHops(plan, proc.ProgramChain(c.EnvHost, view, look))...)
		}
	}
	if len(c.Unshown) == 0 && !c.Shim && len(c.Trees) == 0 && c.EnvHost == "" && !c.Yours {
		return nil
	}
	c.Dirs = treeDirs(c.World, c.Unshown, c.ShimTrees(), home)
	return c
}

// treeDirs is chainDirs where a hop in a shim's tree is shown with the
// tree, never by the install above its bin (cargo's home, above the bin
// of rustup's proxies, holds the person's registry tokens).
func treeDirs(program string, unshown []proc.Hop, trees []string, home string) []string {
	return chainDirs(program, outsideTrees(unshown, trees), trees, home)
}

// outsideTrees are the hops that lie in none of trees.
func outsideTrees(hops []proc.Hop, trees []string) []proc.Hop {
	var out []proc.Hop
	for _, h := range hops {
		if !policy.WithinAny(h.Path, trees) {
			out = append(out, h)
		}
	}
	return out
}

// ShimTrees are the trees of c's shims its sandbox does not show: a
// shims directory's tool tree, the known managers' trees.
func (c *Check) ShimTrees() []string {
	if c.Shim {
		return append([]string{c.Chain.Shim}, c.Trees...)
	}
	return c.Trees
}

// Mountable reports whether the run host may show c's directories by
// itself: the chain is known whole (no shim but a known manager's, whose
// tree the table names; no program by a PATH the
// sandbox lacks, no walk cut short), the program's own path is shown, and
// no directory is too broad to show (a home, ~/.local), the ctx tree's
// (rootDir) or above it, or the kernel's and services' (/proc, /run...).
func (c *Check) Mountable(rootDir, home string) bool {
	if c == nil || c.Top || c.Yours || c.ByPATH || c.Shim || c.Chain.EnvName != "" || c.Chain.Stop != "" || len(c.Dirs) == 0 {
		return false
	}
	for _, d := range c.Dirs {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() || proc.TooBroad(d, home) || policy.Within(d, rootDir) || policy.Within(rootDir, d) || policy.WithinAny(d, kernelDirs) {
			return false
		}
	}
	return true
}

// Mounts are the read-only mounts, at their own paths, of c's
// directories that a run host may add by itself once Mountable: only
// where g's mounts, the person's (mount lines, --mount; in iso landlock
// their sources), show the program's own path, no hop of its chain lies
// where an agent writes or wrote or another user could have chosen it
// (g.Writes: a link planted there would choose what it is shown), no
// directory holds the workspace, and every manager's tree passes
// g.TreeRefusal, whose reason refused gives.
func (c *Check) Mounts(g Guard) (mounts []policy.Mount, refused []string) {
	if !g.granted(c.World) {
		return nil, nil
	}
	for _, h := range c.Chain.Hops {
		if g.Writes(h.Here) {
			return nil, nil
		}
	}
	var out []policy.Mount
	for _, d := range c.Dirs {
		if policy.Within(g.Workspace, d) {
			return nil, nil
		}
		out = append(out, readOnly(d))
	}
	for _, t := range c.Trees {
		if why := g.TreeRefusal(t); why != "" {
			return nil, []string{why}
		}
	}
	return out, nil
}

// kernelDirs hold the kernel's and the running system's interfaces
// (sockets of its services among them), never shown for a program's sake.
var kernelDirs = []string{"/proc", "/sys", "/dev", "/run", "/var/run"}

// unshownHops are the hops of c, there on the host, that plan does not
// show.
func unshownHops(plan *sandboxplan.Plan, c proc.Chain) []proc.Hop {
	var out []proc.Hop
	for _, h := range c.Hops {
		if !h.Missing && !hopShown(plan, h) {
			out = append(out, h)
		}
	}
	return out
}

// chainDirs are the directories to show so that the hops are shown, each
// read-only at its own path: the install a hop lies in (the tree above
// its bin, proc.InstallDir), but for the program's own path its
// directory, unless that tree holds another hop too (nvm's bin/npm, a
// link into the same version's lib); then the shims' trees. None lies in
// another, none is too broad to show whole (a hop in / or a home itself
// gets none: the refusal names it).
func chainDirs(program string, hops []proc.Hop, trees []string, home string) []string {
	var dirs []string
	own, lifted := "", ""
	for _, h := range hops {
		if h.Path == program {
			own, lifted = filepath.Dir(h.Path), proc.InstallDir(h.Path, home)
			continue
		}
		dirs = append(dirs, proc.InstallDir(h.Path, home))
	}
	if own != "" {
		for _, d := range dirs {
			if lifted != own && policy.Within(d, lifted) {
				own = lifted
				break
			}
		}
		dirs = append([]string{own}, dirs...)
	}
	dirs = append(dirs, trees...)
	var out []string
	for _, d := range dirs {
		if !proc.TooBroad(d, home) {
			out = append(out, d)
		}
	}
	return outermost(out)
}

// outermost is dirs without those within another of them, in their
// first order.
func outermost(dirs []string) []string {
	byLength := append([]string(nil), dirs...)
	sort.SliceStable(byLength, func(i, j int) bool { return len(byLength[i]) < len(byLength[j]) })
	var kept []string
	keep := map[string]bool{}
	for _, d := range byLength {
		inside := false
		for _, k := range kept {
			if policy.Within(d, k) {
				inside = true
				break
			}
		}
		if !inside {
			kept = append(kept, d)
			keep[d] = true
		}
	}
	var out []string
	for _, d := range dirs {
		if keep[d] {
			out = append(out, d)
			delete(keep, d)
		}
	}
	return out
}

// maxPathDirScan bounds the programs of one PATH directory PathDirNeeds
// walks (a ~/.local/bin holds tens; a system bin thousands, and is not
// asked about).
const maxPathDirScan = 256

// PathDirNeeds are the directories to show, read-only at their own
// paths, so that the programs of dir, a directory of an agent's PATH,
// start in the sandbox of plan: dir itself where it is not shown (a
// shims directory's whole tool tree), and what their chains lead to
// (doctor's fix; the same as a start's refusal; a known manager's
// directory, its trees: m). progs are the programs whose chains leave
// what is shown; nil dirs when all of dir is shown.
func PathDirNeeds(plan *sandboxplan.Plan, dir, pathVar string, m Managers) (dirs, progs []string) {
	entries, _ := os.ReadDir(dir)
	if len(entries) > maxPathDirScan {
		entries = entries[:maxPathDirScan]
	}
	view, look := View(plan), LookPath(plan, pathVar)
	// a manager's trees, where the person mounted its directory of
	// shims, the run host shows by itself (PathShimMounts)
	shown, byHost := ShownAt(plan, dir) != "", []string(nil)
	if shown {
		byHost = m.ShimTrees(dir)
	}
	for _, ent := range entries {
		p := filepath.Join(dir, ent.Name())
		if !IsExecutableFile(view(p)) {
			continue
		}
		c := proc.ProgramChain(p, view, look)
		var trees []string
		for _, t := range m.chainTrees(plan, c) {
			if !policy.WithinAny(t, byHost) {
				trees = append(trees, t)
			}
		}
		if c.Shim != "" && ShownAt(plan, c.Shim) == "" {
			trees = append([]string{c.Shim}, trees...)
		}
		need := treeDirs(p, outsideTrees(unshownHops(plan, c), byHost), trees, m.Home)
		if len(need) > 0 && (len(need) > 1 || need[0] != dir) {
			progs = append(progs, ent.Name())
		}
		dirs = append(dirs, need...)
	}
	if !shown {
		if filepath.Base(dir) == "shims" {
			dirs = append(dirs, filepath.Dir(dir))
		}
		dirs = append(append([]string{dir}, dirs...), m.ShimTrees(dir)...)
	}
	return outermost(dirs), progs
}
