package sandbox

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"ctx/fsops/broker"
	"ctx/fsops/proc"
	"ctx/fsops/toolworker"
	"ctx/policy/sandboxplan"
)

// testToolWorker is this test binary as a tool worker: given its order it
// says whether a program it starts inherits its socket to the init, reports
// ENOENT with its arguments as the detail, and exits 3.
//
// Its calls named stay... are in-process calls after which it may stay
// (testStayingCall).
func testToolWorker() int {
	for {
		call, status := toolworker.NextOrder(func(argv []string) bool { return strings.HasPrefix(argv[0], "stay") })
		if call == nil {
			return status
		}
		if !strings.HasPrefix(call.Argv[0], "stay") {
			return testExitingCall(call)
		}
		status = testStayingCall(call)
		if !call.Again(status) {
			return status
		}
	}
}

func testExitingCall(call *toolworker.Call) int {
	out, _ := exec.Command("/bin/sh", "-c", `if [ -e /proc/$$/fd/3 ]; then echo inherited; else echo closed; fi`).Output()
	os.Stdout.Write(out)
	call.Report(broker.Report{Errno: "ENOENT", Detail: strings.Join(call.Argv[1:], " ")})
	call.Report(broker.Report{Errno: "EFORGED"}) // a second report is not sent
	return 3
}

// TestWorkerReportsWithItsExit: a call of ctx's own process runs in a tool
// worker, one started for it (no idle worker) or the warm one, and what
// the tool reports of its call reaches the host in the init's report of
// its exit, on the one order channel: its first report, with the status
// the init observed. The worker's socket to the init is not inherited by
// what the tool starts (a program it runs could otherwise report for it).
func TestWorkerReportsWithItsExit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host, initEnd, err := broker.NewOrderChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	defer initEnd.Close()
	b := &initBroker{ch: initEnd, plan: &sandboxplan.Plan{Worker: exe}, byPid: map[int]uint64{}, pgid: map[uint64]int{},
		retired: map[int]bool{}, working: map[int]*toolWorker{}, ended: make(chan workerEnded, endedQueue), joined: map[int]bool{}}
	defer func() {
		for _, w := range b.idle {
			syscall.Kill(w.pid, syscall.SIGKILL)
			syscall.Wait4(w.pid, nil, 0, nil)
		}
	}()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for id, way := range []string{"started for the call", "warm"} {
		if (len(b.idle) > 0) != (way == "warm") {
			t.Fatalf("%s: idle workers %v", way, b.idle)
		}
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		o := broker.Order{Op: broker.OpExec, ID: uint64(id + 1), Path: exe, Argv: []string{"fs.read", "the", "args"},
			Env: []string{"PATH=/usr/bin:/bin"}, Cwd: t.TempDir(), Worker: true}
		b.runInWorker(o, []*os.File{devnull, w, w})
		w.Close()
		pid, ok := b.pgid[o.ID]
		if !ok {
			t.Fatalf("%s: no process for the call", way)
		}
		out, _ := io.ReadAll(r)
		r.Close()
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			t.Fatal(err)
		}
		b.exited(pid, proc.StatusCode(ws))
		var rep broker.InitReport
		if _, err := broker.Recv(int(host.Fd()), &rep, 0); err != nil {
			t.Fatal(err)
		}
		if rep.Op != broker.OpExit || rep.ID != o.ID || rep.Status != 3 || rep.Tool == nil ||
			*rep.Tool != (broker.Report{Errno: "ENOENT", Detail: "the args"}) {
			t.Errorf("%s: init reported %+v (tool %+v), want the exit 3 of call %d with the tool's first report", way, rep, rep.Tool, o.ID)
		}
		if string(out) != "closed\n" {
			t.Errorf("%s: the tool's program found its socket to the init %q, want closed", way, out)
		}
	}
}
