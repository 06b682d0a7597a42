package toolchain

import (
	"path/filepath"
	"strings"

	"ctx/fsops/proc"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// Some version managers' programs are neither links nor scripts: volta's
// node, npm and the programs of the packages it installed (~/.volta/bin)
// are links to, or copies of, one binary, volta-shim, and rustup's cargo
// and rustc (~/.cargo/bin) hard links or copies of rustup itself. When it
// runs, that binary reads the manager's settings and executes the tool it
// picks from the manager's own tree, so no chain of links and #! lines
// leads there: the table below says what the programs of each manager's
// directory need.

// A managerHome is a version manager's directory: the value of its
// variable where that is set, else rel in the person's home.
type managerHome struct{ variable, rel string }

var (
	voltaHome  = managerHome{"VOLTA_HOME", ".volta"}
	cargoHome  = managerHome{"CARGO_HOME", ".cargo"}
	rustupHome = managerHome{"RUSTUP_HOME", ".rustup"}
)

// A shimLayout is a manager whose shims are the programs of home's bin:
// they need home whole (whole), or only that bin, and the other homes
// (also), whole. cargo's home is not shown whole: its credentials.toml
// holds the person's registry tokens, and the proxies need only its bin.
type shimLayout struct {
	home  managerHome
	whole bool
	also  []managerHome
}

var shimLayouts = []shimLayout{
	{home: voltaHome, whole: true},
	{home: cargoHome, also: []managerHome{rustupHome}},
}

// Managers says where the managers of a run keep their homes: the
// variables of the agent's environment (its env control's), else the
// caller's, else the default directories in the caller's home.
type Managers struct {
	Agent  []string            // the agent's environment, KEY=VALUE
	Caller func(string) string // the caller's environment; nil for none
	Home   string              // the caller's home
}

// places are the directories h may be for m: the agent's value, the
// caller's, the default; absolute ones only, first first.
func (m Managers) places(h managerHome) []string {
	var out []string
	add := func(p string) {
		if p = filepath.Clean(p); filepath.IsAbs(p) && !proc.TooBroad(p, m.Home) {
			out = append(out, p)
		}
	}
	for _, kv := range m.Agent {
		if v, ok := strings.CutPrefix(kv, h.variable+"="); ok {
			add(v)
		}
	}
	if m.Caller != nil && m.Caller(h.variable) != "" {
		add(m.Caller(h.variable))
	}
	if filepath.IsAbs(m.Home) {
		add(filepath.Join(m.Home, h.rel))
	}
	return out
}

// ShimTrees are the directories the programs of dir need, read-only, when
// dir is a known manager's directory of shims (volta's ~/.volta/bin, the
// whole ~/.volta; rustup's ~/.cargo/bin, itself and ~/.rustup); nil for
// any other directory. A home the host lacks is left out.
func (m Managers) ShimTrees(dir string) []string {
	dir = filepath.Clean(dir)
	for _, l := range shimLayouts {
		for _, h := range m.places(l.home) {
			if filepath.Join(h, "bin") != dir {
				continue
			}
			trees := []string{dir}
			if l.whole {
				trees = []string{h}
			}
			for _, also := range l.also {
				if at := m.places(also); len(at) > 0 && isDir(at[0]) {
					trees = append(trees, at[0])
				}
			}
			return trees
		}
	}
	return nil
}

// chainTrees are the managers' trees the hops of c lie in that plan does
// not show, outermost.
func (m Managers) chainTrees(plan *sandboxplan.Plan, c proc.Chain) []string {
	var out []string
	for _, h := range c.Hops {
		if h.Missing {
			continue
		}
		for _, t := range m.ShimTrees(filepath.Dir(h.Path)) {
			if ShownAt(plan, t) == "" {
				out = append(out, t)
			}
		}
	}
	return outermost(out)
}

// PathShimMounts are the read-only mounts, at their own paths, of the
// trees the managers' directories on pathVar, the agent's PATH, need
// where plan shows the directory (the person mounted it) but not the
// trees: a program the agent runs by PATH (cargo from its shell) starts
// there as the run's own program would. A tree g refuses is left out,
// with its reason.
func PathShimMounts(plan *sandboxplan.Plan, pathVar string, m Managers, g Guard) ([]policy.Mount, []string) {
	var mounts []policy.Mount
	var refused []string
	for _, dir := range filepath.SplitList(pathVar) {
		if !filepath.IsAbs(dir) || ShownAt(plan, dir) == "" || proc.TooBroad(dir, m.Home) {
			continue
		}
		for _, t := range m.ShimTrees(dir) {
			if ShownAt(plan, t) != "" || !isDir(t) || policy.WithinAny(t, kernelDirs) {
				continue
			}
			if why := g.TreeRefusal(t); why != "" {
				refused = append(refused, why)
				continue
			}
			mounts = append(mounts, readOnly(t))
		}
	}
	return mounts, refused
}
