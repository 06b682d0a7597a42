package sandbox

import (
	"os"
	"strings"
	"testing"

	"ctx/policy/sandboxplan"
)

// A read-only rbind makes every mount under its source read-only too, not
// only the top one (the new mount API sets the flags on the whole detached
// tree at once), and leaves the source itself writable. The source here is
// a tmpfs with a tmpfs inside it, both mounted by the plan under /tmp
// (where the second wall lets the agent write).
func TestReadOnlyRbindCoversSubmounts(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	for _, iso := range []string{"uid", "userns"} {
		t.Run(iso, func(t *testing.T) {
			newRoot := t.TempDir()
			os.Chmod(newRoot, 0o755)
			plan := testPlanWithRoot(newRoot, iso, 0, ws,
				`for d in /tmp/src /tmp/src/sub /tmp/ro /tmp/ro/sub; do if touch $d/x 2>/dev/null; then echo $d=rw; else echo $d=ro; fi; done; cat /tmp/ro/sub/seen`)
			pre := []sandboxplan.Op{
				{Kind: sandboxplan.OpTmpfs, Target: "/tmp/src", Mode: 0o777},
				{Kind: sandboxplan.OpTmpfs, Target: "/tmp/src/sub", Mode: 0o777},
				{Kind: sandboxplan.OpFile, Target: "/tmp/src/sub/seen", Data: []byte("through the rbind\n")},
				{Kind: sandboxplan.OpBind, Source: newRoot + "/tmp/src", Target: "/tmp/ro", ReadOnly: true, NoSuid: true, NoDev: true, Recursive: true},
			}
			// Before the loopback and the pivot (the last three ops).
			n := len(plan.Ops) - 3
			plan.Ops = append(plan.Ops[:n], append(pre, plan.Ops[n:]...)...)
			out, code := runPlan(t, plan)
			want := "/tmp/src=rw\n/tmp/src/sub=rw\n/tmp/ro=ro\n/tmp/ro/sub=ro\nthrough the rbind\n"
			if code != 0 || !strings.HasSuffix(out, want) {
				t.Fatalf("exit %d, output:\n%s\nwant it to end with:\n%s", code, out, want)
			}
		})
	}
}
