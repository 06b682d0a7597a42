package sandboxplan

import (
	"path"
	"strings"

	"ctx/policy"
)

// PlanExposes names what of plan would show the agent hostPath (a host
// path: a run's secret, DESIGN §16 rule 12), or "" when nothing does. In
// a plan with mounts, a bind whose source is hostPath or a directory
// above it (or the agent's own root filesystem) would; in iso landlock,
// whose rules are host paths, any rule on hostPath or above it. A rule or
// bind below hostPath shows only what is below it, which is not a secret.
func PlanExposes(plan *Plan, hostPath string) string {
	if plan == nil || hostPath == "" {
		return ""
	}
	if plan.Iso == string(policy.IsoLandlock) {
		for _, r := range plan.Access {
			if r.Path != "" && policy.Within(hostPath, r.Path) {
				return "the Landlock rule on " + r.Path
			}
		}
		return ""
	}
	if plan.RootFS && plan.NewRoot != "" && policy.Within(hostPath, plan.NewRoot) {
		return "the root filesystem " + plan.NewRoot
	}
	for _, op := range plan.Ops {
		if op.Kind == OpBind && op.Source != "" && policy.Within(hostPath, op.Source) {
			return "the mount of " + op.Source + " at " + op.Target
		}
	}
	return ""
}

// PlanHostPath is the host path the sandbox of plan shows at p (an
// absolute path inside it), or "" when it shows no host file there: p is
// on a tmpfs or file the plan made (/tmp, the new root's own tmpfs), or,
// in iso landlock, beneath no rule. The last mount at p or above it
// decides, as later mounts cover earlier ones; a symlink the plan made
// (a merged-/usr /bin) is followed.
func PlanHostPath(plan *Plan, p string) string {
	p = path.Clean(p)
	if plan == nil || !path.IsAbs(p) {
		return ""
	}
	if plan.Iso == string(policy.IsoLandlock) {
		for _, r := range plan.Access {
			if r.Path != "" && policy.Within(p, r.Path) {
				return p
			}
		}
		return ""
	}
	for hops := 0; hops < 8; hops++ {
		var last *Op
		for i := range plan.Ops {
			op := &plan.Ops[i]
			switch op.Kind {
			case OpBind, OpTmpfs, OpProc, OpDevpts, OpFile, OpSymlink, OpMask:
				if op.Target != "" && policy.Within(p, op.Target) {
					last = op
				}
			}
		}
		switch {
		case last == nil && plan.RootFS && plan.NewRoot != "":
			return path.Join(plan.NewRoot, p)
		case last == nil:
			return ""
		case last.Kind == OpBind:
			return path.Join(last.Source, strings.TrimPrefix(p, last.Target))
		case last.Kind != OpSymlink:
			return ""
		}
		link := last.Source
		if !path.IsAbs(link) {
			link = path.Join(path.Dir(last.Target), link)
		}
		p = path.Join(link, strings.TrimPrefix(p, last.Target))
	}
	return ""
}
