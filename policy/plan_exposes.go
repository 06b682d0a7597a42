package policy

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
	if plan.Iso == string(IsoLandlock) {
		for _, r := range plan.Access {
			if r.Path != "" && within(hostPath, r.Path) {
				return "the Landlock rule on " + r.Path
			}
		}
		return ""
	}
	if plan.RootFS && plan.NewRoot != "" && within(hostPath, plan.NewRoot) {
		return "the root filesystem " + plan.NewRoot
	}
	for _, op := range plan.Ops {
		if op.Kind == OpBind && op.Source != "" && within(hostPath, op.Source) {
			return "the mount of " + op.Source + " at " + op.Target
		}
	}
	return ""
}
