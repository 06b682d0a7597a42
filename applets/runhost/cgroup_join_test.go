package runhost

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ctx/fsops"
	"ctx/fsops/cgroup"
	"ctx/fsops/sandbox"
	"ctx/policy/sandboxplan"
)

// TestInitJoinFollowsTheLastInit: the tasks files and the "joins itself"
// state are always those of the last init the run prepared. An early
// init abandoned (its plan refused) or never started is replaced by one
// that gets tasks files of its own; an init started without them is never
// treated as joining (it would then be neither born inside nor moved in,
// outside every budget).
func TestInitJoinFollowsTheLastInit(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("a run cgroup needs root")
	}
	cg, why := cgroup.New("ctx-test-"+fsops.NewRunID(), cgroup.Limits{Pids: 64}, nil)
	if cg == nil {
		if os.Getenv("CTX_REQUIRE_SANDBOX") != "" {
			t.Fatalf("a run cgroup is required (CTX_REQUIRE_SANDBOX) but: %s", why)
		}
		t.Skipf("no run cgroup here: %s", why)
	}
	defer cg.Remove()
	if cg.Version != 1 {
		t.Skip("cgroup v2: the init is moved in whole, never joins by thread")
	}
	start := sandbox.Start{Namespaces: sandboxplan.Namespaces{Mount: true, PID: true}}
	newInit := func() *sandbox.Sandbox {
		sb, err := sandbox.NewFor(start)
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	joins := func(sb *sandbox.Sandbox) bool {
		return slices.ContainsFunc(sb.Cmd.Args, func(a string) bool { return strings.HasPrefix(a, "cgroup-tasks=") })
	}
	r := &AgentRun{budgets: &runBudgets{cgroup: cg}}

	early := newInit()
	r.letInitJoinCgroup(early)
	if !r.initJoins || r.joinCmd != early.Cmd || !joins(early) {
		t.Fatalf("the early init was not handed the tasks files")
	}
	handed := r.cgTasks
	// Its plan needs other namespaces (the network): takeEarly abandons
	// it, and the run host closes the files it was handed.
	early.Cmd.Path = "/bin/true" // an init that exits at once: abandoning it waits for nothing
	ch := make(chan earlyInit, 1)
	ch <- earlyInit{sb: early}
	r.early = ch
	r.plan = &sandboxplan.Plan{Iso: "uid", NewRoot: "/nonexistent", Argv: []string{"true"}, Cwd: "/",
		Namespaces: sandboxplan.Namespaces{Mount: true, PID: true, Net: true}}
	if sb := r.takeEarly(); sb != nil {
		t.Fatal("the early init took a plan for other namespaces")
	}
	if r.initJoins || r.joinCmd != nil {
		t.Fatal("the abandoned init still owns the join")
	}
	if _, err := handed[0].Stat(); err == nil {
		t.Fatal("the abandoned init's tasks files are still open in the run host")
	}
	late := newInit()
	r.letInitJoinCgroup(late)
	if !r.initJoins || r.joinCmd != late.Cmd || !joins(late) {
		t.Fatal("the init prepared after an abandoned one was not handed the tasks files")
	}
	// A command other than the one handed the files never starts as if it
	// joined; one that fails to start leaves nothing that says it did.
	late.Cmd.Path = filepath.Join(t.TempDir(), "missing")
	if err := r.startFirst(late.Cmd); err == nil {
		t.Fatal("a missing init started")
	}
	if r.initJoins || r.joinCmd != nil || r.cgTasks != nil {
		t.Fatalf("a failed start left the join state: joins=%v", r.initJoins)
	}
	other := newInit()
	r.letInitJoinCgroup(other)
	if r.joinCmd != other.Cmd {
		t.Fatal("the last init prepared does not own the join")
	}
	r.dropCgroupJoin()
	other.Abandon()
	late.Abandon()
}
