package sandbox

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ctx/policy/sandboxplan"

	"golang.org/x/sys/unix"
)

// An init started before its plan exists (as the run host starts it
// while it prepares the run) builds the sandbox once the plan comes, and
// runs the program only then.
func TestSandboxStartedBeforePlan(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	if err := os.WriteFile(ws+"/f", []byte("in the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := testPlan(t, "userns", 0, ws, "cat /workspace/f; ls /proc/self/fd")
	sb, out := startWaitingInit(t, plan)
	// Started, it waits: nothing runs before the plan.
	time.Sleep(50 * time.Millisecond)
	if out.Len() != 0 {
		t.Fatalf("the init wrote before it had its plan: %q", out.String())
	}
	if err := sb.SetPlan(plan); err != nil {
		t.Fatal(err)
	}
	sb.SendPlan()
	sb.SendPlan() // a second call does nothing
	sb.Release()
	if err := sb.Cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	if !strings.Contains(got, "in the workspace") {
		t.Fatalf("the program did not run in the planned sandbox:\n%s", got)
	}
	// Nothing of the plan channel reaches the program: 0-2, and the
	// descriptor ls itself reads.
	for _, l := range strings.Fields(got) {
		if l == "4" || l == "5" || l == "6" {
			t.Fatalf("the program holds descriptor %s:\n%s", l, got)
		}
	}
}

// An init started for one set of namespaces is never given a plan that
// needs another: SetPlan refuses, and the run host starts a new init.
func TestSandboxPlanMustMatchStart(t *testing.T) {
	plan := testPlan(t, "userns", 0, t.TempDir(), "true")
	start := StartOf(plan)
	start.Namespaces.Net = false // born with the network, the plan walls it off
	sb, err := NewFor(start)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Abandon()
	if err := sb.SetPlan(plan); err == nil {
		t.Fatal("a plan needing a network namespace was given to an init born without one")
	}
	if sb.plan != nil {
		t.Fatal("the refused plan was kept")
	}
	start = StartOf(plan)
	start.UID++
	other, err := NewFor(start)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Abandon()
	if err := other.SetPlan(plan); err == nil {
		t.Fatal("a plan for another uid was given to the init")
	}
}

// The init accounts for every descriptor it is handed: more or fewer
// than the handoff byte names, or an unknown bit, is refused, and what
// came is closed.
func TestReceiveHandoffRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		mask byte
		nfds int
		ok   bool
	}{
		{"none", 0, 0, true},
		{"broker", handoffBroker, 1, true},
		{"all three", handoffRun | handoffIDMap | handoffBroker, 3, true},
		{"one more than named", handoffBroker, 2, false},
		{"one fewer than named", handoffRun | handoffBroker, 1, false},
		{"unnamed descriptor", 0, 1, false},
		{"unknown bit", 1 << 5, 0, false},
		{"more than there is room for", handoffRun | handoffIDMap | handoffBroker, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runFile, idmappedWorkspace, brokerChannel = nil, nil, nil
			defer func() { runFile, idmappedWorkspace, brokerChannel = nil, nil, nil }()
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			var passed []int
			var probes []*os.File
			for i := 0; i < tc.nfds; i++ {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				probes = append(probes, r)
				passed = append(passed, int(w.Fd()))
				defer w.Close()
			}
			if err := sendHandoff(fds[0], tc.mask, passed); err != nil {
				t.Fatal(err)
			}
			// Our copies of the write ends go: a received copy the
			// receiver kept would hold the pipe open.
			for _, fd := range passed {
				unix.Close(fd)
			}
			err = receiveHandoff(fds[1])
			if (err == nil) != tc.ok {
				t.Fatalf("receiveHandoff: %v, want ok=%v", err, tc.ok)
			}
			got := 0
			for _, f := range []*os.File{runFile, idmappedWorkspace, brokerChannel} {
				if f != nil {
					got++
					f.Close()
				}
			}
			if !tc.ok && got != 0 {
				t.Fatalf("a refused handoff kept %d descriptors", got)
			}
			// Every pipe's last write end is closed now (refused: by
			// receiveHandoff; accepted: above): its read end sees EOF.
			for _, r := range probes {
				r.SetReadDeadline(time.Now().Add(2 * time.Second))
				if n, err := r.Read(make([]byte, 1)); n != 0 || err == nil || err == os.ErrDeadlineExceeded {
					t.Fatalf("a descriptor handed over is still open (read %d, %v)", n, err)
				}
			}
		})
	}
}

// Abandoning a started init that never got its plan kills it before it
// can report the missing plan, and reaps it.
func TestSandboxAbandonedQuietly(t *testing.T) {
	requireSandbox(t)
	sb, out := startWaitingInit(t, testPlan(t, "userns", 0, t.TempDir(), "true"))
	pid := sb.Cmd.Process.Pid
	time.Sleep(20 * time.Millisecond)
	sb.Abandon()
	if sb.Cmd.ProcessState == nil {
		t.Fatal("the abandoned init was not reaped")
	}
	if out.Len() != 0 {
		t.Fatalf("the abandoned init reported: %q", out.String())
	}
	if err := unix.Kill(pid, 0); err == nil {
		t.Fatalf("the abandoned init %d still exists", pid)
	}
}

// The init reports the program's status once the run has ended, before
// it exits itself; its own exit status says the same.
func TestSandboxReportsEnd(t *testing.T) {
	requireSandbox(t)
	plan := testPlan(t, "userns", 0, t.TempDir(), "sleep 0.1 & exit 5")
	sb, err := New(plan)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sb.Cmd.Stdout, sb.Cmd.Stderr = &out, &out
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	st, ok := <-sb.Ended()
	if !ok || st != 5 {
		t.Fatalf("reported %d (ok=%v), want 5\n%s", st, ok, out.String())
	}
	if err := sb.Cmd.Wait(); err == nil || sb.Cmd.ProcessState.ExitCode() != 5 {
		t.Fatalf("the init exited %v, want status 5", err)
	}
}

// An init asked to end (SIGTERM) before its program started ends without
// starting it, with the status the signal would have given, though it
// catches its signals from its first moment.
func TestSandboxTerminatedBeforeProgram(t *testing.T) {
	requireSandbox(t)
	// The signal can race the init's check (a busy machine delays the
	// runtime's delivery of it): several attempts make a lost one show.
	for i := 0; i < 8 && !t.Failed(); i++ {
		terminateBeforeProgram(t)
	}
}

func terminateBeforeProgram(t *testing.T) {
	ws := t.TempDir()
	plan := testPlan(t, "userns", 0, ws, "echo ran > /workspace/ran")
	sb, out := startWaitingInit(t, plan)
	// Wait until the init waits for its plan: one of its threads blocked
	// receiving from the plan channel (descriptor 4). It registered its
	// signals before that read, so the signal meets its handler, not the
	// runtime's default action. (SigCgt in /proc/PID/status says nothing
	// here: the Go runtime catches SIGTERM from its start.)
	task := "/proc/" + strconv.Itoa(sb.Cmd.Process.Pid) + "/task/"
	waiting := false
	for i := 0; i < 1000 && !waiting; i++ {
		tids, _ := os.ReadDir(task)
		for _, tid := range tids {
			call, _ := os.ReadFile(task + tid.Name() + "/syscall")
			f := strings.Fields(string(call))
			waiting = waiting || len(f) > 1 && f[1] == "0x4" &&
				(f[0] == strconv.Itoa(unix.SYS_RECVMSG) || f[0] == strconv.Itoa(unix.SYS_READ))
		}
		time.Sleep(time.Millisecond)
	}
	if !waiting {
		t.Fatal("the init never waited for its plan")
	}
	if err := sb.Cmd.Process.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := sb.SetPlan(plan); err != nil {
		t.Fatal(err)
	}
	sb.SendPlan()
	sb.Release()
	sb.Cmd.Wait()
	if code := sb.Cmd.ProcessState.ExitCode(); code != 128+int(unix.SIGTERM) {
		t.Errorf("the init exited %d, want %d\n%s", code, 128+int(unix.SIGTERM), out.String())
	}
	if _, err := os.Stat(ws + "/ran"); err == nil {
		t.Error("the program ran after the init was asked to end")
	}
}

// Only "end N\n" with N a status is a report.
func TestReadEndReport(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"end 0\n", 0, true},
		{"end 137\n", 137, true},
		{"end 256\n", 0, false},
		{"end -1\n", 0, false},
		{"end 3", 0, false},
		{"fin 3\n", 0, false},
		{"end 3\nmore", 0, false},
		{"", 0, false},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString(tc.in)
		w.Close()
		got, ok := readEndReport(r)
		r.Close()
		if ok != tc.ok || got != tc.want {
			t.Errorf("readEndReport(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// startWaitingInit starts an init born for plan's namespaces, without its
// plan (as the run host starts it early); its output is gathered in a
// buffer that may be read while it runs.
func startWaitingInit(t *testing.T, plan *sandboxplan.Plan) (*Sandbox, *lockedBuffer) {
	t.Helper()
	sb, err := NewFor(StartOf(plan))
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	sb.Cmd.Stdout, sb.Cmd.Stderr = out, out
	if err := sb.Cmd.Start(); err != nil {
		sb.Abandon()
		t.Fatal(err)
	}
	return sb, out
}

// lockedBuffer is a bytes.Buffer for a writer in another goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
