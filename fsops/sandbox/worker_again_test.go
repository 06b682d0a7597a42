package sandbox

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
	"ctx/fsops/proc"
	"ctx/fsops/toolworker"
	"ctx/policy/sandboxplan"
)

// testStayingCall is an in-process call of the test tool worker: it prints
// its pid, what it finds of an earlier call (the variable LEFT, its
// directory), plants LEFT for the next, reports EAGAIN and returns 5.
// stay-goroutine leaves a goroutine running; stay-burn uses more CPU
// than a staying worker may.
func testStayingCall(call *toolworker.Call) int {
	wd, _ := os.Getwd()
	dumpable, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	fmt.Printf("pid=%d left=%q wd=%s dumpable=%d\n", os.Getpid(), os.Getenv("LEFT"), wd, dumpable)
	os.Setenv("LEFT", "planted")
	os.Chdir("/proc")
	switch call.Argv[0] {
	case "stay-goroutine":
		go func() { select {} }()
	case "stay-burn":
		for start := cpuTime(); cpuTime()-start <= 2*toolworker.StayCPU; {
		}
	}
	call.Report(broker.Report{Errno: "EAGAIN", Detail: strings.Join(call.Argv, " ")})
	return 5
}

// cpuTime is this process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stayingBroker is an init's broker with the test binary as its worker.
func stayingBroker(t *testing.T) (*initBroker, *os.File) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host, initEnd, err := broker.NewOrderChannel()
	if err != nil {
		t.Fatal(err)
	}
	b := &initBroker{ch: initEnd, plan: &sandboxplan.Plan{Worker: exe}, byPid: map[int]uint64{}, pgid: map[uint64]int{},
		retired: map[int]bool{}, working: map[int]*toolWorker{}, ended: make(chan workerEnded, endedQueue), joined: map[int]bool{}}
	t.Cleanup(func() {
		for _, w := range b.idle {
			syscall.Kill(w.pid, syscall.SIGKILL)
			syscall.Wait4(w.pid, nil, 0, nil)
		}
		for pid := range b.retired {
			syscall.Wait4(pid, nil, 0, nil)
		}
		host.Close()
		initEnd.Close()
	})
	return b, host
}

// stayingCall runs one call of tool in b's worker as the init's loop
// would, and returns what the caller read on its standard output (to its
// end), the init's report to the host, and the worker's pid.
func stayingCall(t *testing.T, b *initBroker, host *os.File, id uint64, tool, cwd string) (string, broker.InitReport, int) {
	t.Helper()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	o := broker.Order{Op: broker.OpExec, ID: id, Path: b.plan.Worker, Argv: []string{tool, "arg"},
		Env: []string{"PATH=/usr/bin:/bin"}, Cwd: cwd, Worker: true}
	b.runInWorker(o, []*os.File{devnull, w, w})
	w.Close()
	pid, ok := b.pgid[id]
	if !ok {
		t.Fatalf("call %d: no process", id)
	}
	// The caller's stream ends when the call does, whether or not the
	// worker stays.
	out, _ := io.ReadAll(r)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("call %d: neither an end nor an exit", id)
		}
		select {
		case e := <-b.ended:
			b.callEnded(e)
		default:
			var ws syscall.WaitStatus
			if p, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); p != pid {
				continue
			}
			b.exited(pid, proc.StatusCode(ws))
		}
		break
	}
	var rep broker.InitReport
	if _, err := broker.Recv(int(host.Fd()), &rep, 0); err != nil {
		t.Fatal(err)
	}
	return string(out), rep, pid
}

// TestWorkerStaysWithNothingOfItsCall: after an in-process call the worker
// takes the next one in the same process, and the init reports each call's
// end with the status and report the tool gave, as it reports an exit.
// Nothing of the first call reaches the second: its environment and its
// directory are gone, and the caller of each saw its stream end with its
// call. The staying worker is never dumpable (no process of the agent can
// trace it or open its memory between calls).
func TestWorkerStaysWithNothingOfItsCall(t *testing.T) {
	b, host := stayingBroker(t)
	var pids []int
	for id := uint64(1); id <= 3; id++ {
		cwd := t.TempDir()
		out, rep, pid := stayingCall(t, b, host, id, "stay", cwd)
		pids = append(pids, pid)
		if want := fmt.Sprintf("pid=%d left=\"\" wd=%s dumpable=0\n", pid, cwd); out != want {
			t.Errorf("call %d printed %q, want %q", id, out, want)
		}
		if rep.Op != broker.OpExit || rep.ID != id || rep.Status != 5 || rep.Tool == nil ||
			*rep.Tool != (broker.Report{Errno: "EAGAIN", Detail: "stay arg"}) {
			t.Errorf("call %d: init reported %+v (tool %+v), want exit 5 with the tool's report", id, rep, rep.Tool)
		}
		if len(b.idle) != 1 || b.idle[0].pid != pid {
			t.Fatalf("call %d: the worker %d is not waiting again (idle %v)", id, pid, b.idle)
		}
	}
	if pids[0] != pids[1] || pids[1] != pids[2] {
		t.Errorf("the calls ran in processes %v, want one", pids)
	}
}

// TestWorkerLeavesWhenItsCallLeftSomething: a call that leaves a goroutine
// running, or that used more CPU than a staying worker may (RLIMIT_CPU
// counts per process), ends its worker; its report still goes with the
// exit. A call the host cancelled ends its worker too.
func TestWorkerLeavesWhenItsCallLeftSomething(t *testing.T) {
	for _, tool := range []string{"stay-goroutine", "stay-burn"} {
		b, host := stayingBroker(t)
		_, rep, pid := stayingCall(t, b, host, 1, tool, "/")
		if rep.Status != 5 || rep.Tool == nil || rep.Tool.Errno != "EAGAIN" {
			t.Errorf("%s: init reported %+v (tool %+v), want exit 5 with the tool's report", tool, rep, rep.Tool)
		}
		for _, w := range b.idle {
			if w.pid == pid {
				t.Errorf("%s: the worker stays after its call", tool)
			}
		}
	}
	b, host := stayingBroker(t)
	stayingCall(t, b, host, 1, "stay", "/")
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	o := broker.Order{Op: broker.OpExec, ID: 2, Path: b.plan.Worker, Argv: []string{"stay", "arg"}, Cwd: "/", Worker: true}
	b.runInWorker(o, []*os.File{devnull, devnull, devnull})
	b.working[b.pgid[2]].cancelled = true
	e := <-b.ended
	b.callEnded(e)
	if len(b.idle) != 0 || !b.retired[e.w.pid] {
		t.Errorf("the worker of a cancelled call stays (idle %v)", b.idle)
	}
}
