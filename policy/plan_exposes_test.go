package policy

import "testing"

// TestPlanExposes: a bind or a Landlock rule on the secret or above it
// exposes it; one below it, or a sibling, does not.
func TestPlanExposes(t *testing.T) {
	secret := "/run/user/1000/cortexfs/secret/run1"
	ns := &Plan{Iso: "userns", Ops: []Op{
		{Kind: OpBind, Source: "/run/user/1000/cortexfs/run/run1", Target: "/mnt/proc"},
		{Kind: OpBind, Source: "/usr", Target: "/usr"},
	}}
	if got := PlanExposes(ns, secret); got != "" {
		t.Fatalf("a sibling bind exposes the secret: %s", got)
	}
	ns.Ops = append(ns.Ops, Op{Kind: OpBind, Source: "/run/user/1000", Target: "/mnt/x"})
	if got := PlanExposes(ns, secret); got == "" {
		t.Fatal("a bind of the runtime directory's parent does not expose the secret")
	}
	ll := &Plan{Iso: string(IsoLandlock), Access: []AccessRule{{Path: "/proc"}, {Path: "/run/user/1000/cortexfs/secret/run1x"}}}
	if got := PlanExposes(ll, secret); got != "" {
		t.Fatalf("a Landlock rule beside it exposes the secret: %s", got)
	}
	ll.Access = append(ll.Access, AccessRule{Path: "/"})
	if got := PlanExposes(ll, secret); got == "" {
		t.Fatal("a Landlock rule on / does not expose the secret")
	}
	root := &Plan{Iso: "uid", RootFS: true, NewRoot: "/run"}
	if got := PlanExposes(root, secret); got == "" {
		t.Fatal("a root filesystem above it does not expose the secret")
	}
}
