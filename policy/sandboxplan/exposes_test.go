package sandboxplan

import (
	"testing"

	"ctx/policy"
)

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
	ll := &Plan{Iso: string(policy.IsoLandlock), Access: []AccessRule{{Path: "/proc"}, {Path: "/run/user/1000/cortexfs/secret/run1x"}}}
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

// TestPlanHostPath: the last mount at a path or above it decides what the
// sandbox shows there; a tmpfs or the new root's own shows no host file;
// a merged-/usr link is followed; iso landlock shows what its rules reach.
func TestPlanHostPath(t *testing.T) {
	ns := &Plan{Iso: "uid", Ops: []Op{
		{Kind: OpBind, Source: "/usr", Target: "/usr"},
		{Kind: OpSymlink, Source: "usr/bin", Target: "/bin"},
		{Kind: OpTmpfs, Target: "/tmp"},
		{Kind: OpBind, Source: "/ctx/home/60101/agent/coder", Target: "/home/agent"},
		{Kind: OpBind, Source: "/tmp/tc", Target: "/tmp/tc"},
	}}
	for p, want := range map[string]string{
		"/usr/bin/python3":   "/usr/bin/python3",
		"/bin/sh":            "/usr/bin/sh",
		"/tmp/x/prog":        "",
		"/tmp/tc/bin/prog":   "/tmp/tc/bin/prog",
		"/tmp/tcx/prog":      "",
		"/root/.local/bin/x": "",
		"/home/agent/.npmrc": "/ctx/home/60101/agent/coder/.npmrc",
		"relative/prog":      "",
	} {
		if got := PlanHostPath(ns, p); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
	ns.RootFS, ns.NewRoot = true, "/ctx/home/60101/agent/coder/root"
	if got := PlanHostPath(ns, "/opt/x"); got != "/ctx/home/60101/agent/coder/root/opt/x" {
		t.Errorf("own root filesystem: %q", got)
	}
	ll := &Plan{Iso: string(policy.IsoLandlock), Access: []AccessRule{{Path: "/usr"}, {Path: "/tmp/tc"}}}
	if got := PlanHostPath(ll, "/tmp/tc/prog"); got != "/tmp/tc/prog" {
		t.Errorf("landlock rule: %q", got)
	}
	if got := PlanHostPath(ll, "/tmp/x/prog"); got != "" {
		t.Errorf("landlock without a rule: %q", got)
	}
}
