package toolchain

import (
	"os"
	"slices"

	"ctx/fsops/proc"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// A Guard is what a run host checks before it shows, by itself, a
// directory of a program's chain or a manager's tree: the person's mounts
// of the run (one must show the program), where this agent or another of
// the tree writes or wrote, and the person, who with root may own what is
// shown.
type Guard struct {
	Mounts    []policy.Mount // the person's, for the run: mount lines and --mount
	Landlock  bool           // iso landlock: a mount is a rule on its source
	Workspace string
	// Places lists where an agent of the tree writes or wrote
	// (OthersWrite, AgentWritePlaces). It is asked only when a directory
	// is to be shown: finding them reads every agent's mounts and every
	// session's workspace record, which most starts never need.
	Places func() []string
	UID    int // the person
}

// places is g.Places(), nil without one.
func (g Guard) places() []string {
	if g.Places == nil {
		return nil
	}
	return g.Places()
}

// Writes reports whether p, or a directory above it, may have been
// chosen by someone else than the person: an agent (p lies where one
// writes or wrote) or another user (proc.OthersMayChange).
func (g Guard) Writes(p string) bool {
	_, changed := proc.OthersMayChange(p, g.UID)
	return changed || policy.WithinAny(p, g.places())
}

// TreeRefusal says why tree may not be shown whole, "" when it may: the
// workspace or a place where an agent writes lies in it or it in one, or
// something in it, a directory above it, or a link on the way to it, may
// have been chosen by another user (proc.TreeOthersMayChange). A
// manager's shim runs whatever of its tree it picks, so every entry
// counts as a hop of its chain; a link in the tree is shown as a link,
// and leads where the sandbox's own view does.
func (g Guard) TreeRefusal(tree string) string {
	refuse := func(why string) string { return "ctx does not show " + tree + " by itself: " + why }
	// the links on the way to the tree, as the kernel follows them, each
	// a hop; the last hop the directory it is
	chain := proc.ProgramChain(tree, func(p string) string { return p }, func(string) string { return "" })
	if len(chain.Hops) == 0 || chain.Hops[len(chain.Hops)-1].Missing || chain.Stop != "" || !isDir(tree) {
		return refuse("it cannot be resolved to a directory")
	}
	writers := append([]string{g.Workspace}, g.places()...)
	for _, h := range chain.Hops {
		for _, p := range writers {
			if p != "" && (policy.Within(p, h.Path) || policy.Within(h.Path, p)) {
				return refuse(p + " is where an agent writes or wrote")
			}
		}
		if at, changed := proc.OthersMayChange(h.Path, g.UID); changed {
			return refuse(at + " is another user's, or writable by its group or others")
		}
	}
	if at, changed := proc.TreeOthersMayChange(chain.Hops[len(chain.Hops)-1].Path, g.UID); changed {
		return refuse(at + " is another user's, or writable by its group or others")
	}
	return ""
}

// granted reports whether a mount of g shows p (in iso landlock, its
// source does).
func (g Guard) granted(p string) bool {
	for _, m := range g.Mounts {
		at := m.Target
		if g.Landlock {
			at = m.Source
		}
		if policy.Within(p, at) {
			return true
		}
	}
	return false
}

// AgentWritePlaces are the host places the agent of a run may write, or
// may have written in a run before: its workspace, the ctx tree (its home
// is there), its writable mounts, in iso landlock the rules of plan that
// let it write.
func AgentWritePlaces(workspace, tree string, mounts []policy.Mount, plan *sandboxplan.Plan) []string {
	places := []string{workspace, tree}
	for _, m := range mounts {
		if !m.ReadOnly {
			places = append(places, m.Source)
		}
	}
	for _, rule := range plan.Access {
		if plan.Iso == string(policy.IsoLandlock) && rule.Write {
			places = append(places, rule.Path)
		}
	}
	return places
}

// RunMounts are the read-only mounts a run host adds by itself for a run
// in plan: the rest of the chain of its program c where that is
// Mountable and g lets it (Check.Mounts: the person mounted the program's
// own path, no hop where an agent writes or another user could have
// chosen it, each manager's tree whole the person's), and the trees of
// the managers' directories of its PATH that the person mounted
// (PathShimMounts, the same tree check); each once, never the ctx tree.
// refused says why a tree was left out, a line each.
func RunMounts(c *Check, plan *sandboxplan.Plan, pathVar string, m Managers, g Guard, rootDir string) (mounts []policy.Mount, refused []string) {
	if c.Mountable(rootDir, m.Home) {
		mounts, refused = c.Mounts(g)
	}
	more, why := PathShimMounts(plan, pathVar, m, g)
	seen := map[string]bool{}
	for _, mt := range mounts {
		seen[mt.Source] = true
	}
	for _, mt := range more {
		if !seen[mt.Source] && !policy.Within(rootDir, mt.Source) && !policy.Within(mt.Source, rootDir) {
			seen[mt.Source] = true
			mounts = append(mounts, mt)
		}
	}
	for _, w := range why {
		if !slices.Contains(refused, w) {
			refused = append(refused, w)
		}
	}
	return mounts, refused
}

// readOnly is the mount of host directory d, read-only at its own path.
func readOnly(d string) policy.Mount {
	return policy.Mount{Source: d, Target: d, ReadOnly: true, Bind: policy.BindRecursive, NoSuid: true, NoDev: true}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
