package proc

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func needSetsid(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid(1)")
	}
}

// waitPid reads the pid a test command writes to file, waiting for it.
func waitPid(t *testing.T, file string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(file)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %q", file, b)
		}
		return pid
	}
	t.Fatalf("%s never written", file)
	return 0
}

// assertGone checks that pid no longer exists at all: killed and reaped
// (a zombie would still answer kill 0).
func assertGone(t *testing.T, what string, pid int) {
	t.Helper()
	if err := unix.Kill(pid, 0); err != unix.ESRCH {
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		t.Errorf("%s %d still exists (kill 0: %v): %s", what, pid, err, st)
	}
}

// daemonize is a shell script that leaves a sleeper behind in a session
// of its own whose leader exited (setsid, then a double fork), records the
// sleeper's pid in $1, and checks it runs.
const daemonize = `setsid sh -c 'sleep 300 & echo $! > "$1"' sh "$1" &
while [ ! -s "$1" ]; do sleep 0.01; done
kill -0 "$(cat "$1")" && echo alive
`

func TestTreeEndsDaemon(t *testing.T) {
	needSetsid(t)
	pidfile := filepath.Join(t.TempDir(), "daemon.pid")
	cmd := exec.Command("/bin/sh", "-c", daemonize, "sh", pidfile)
	var out bytes.Buffer
	cmd.Stdout = &out // the daemon holds this pipe too: Wait must not wait for it
	tree, err := StartTree(cmd)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := tree.Wait(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "alive\n" {
		t.Fatalf("output %q: the daemon did not run", out.String())
	}
	assertGone(t, "daemon", waitPid(t, pidfile))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Wait took %v", d)
	}
}

// Killed on a timeout: the child, its group, and a daemon (with a child
// of its own) that left the group all end.
func TestTreeKill(t *testing.T) {
	needSetsid(t)
	dir := t.TempDir()
	script := `setsid sh -c 'echo $$ > "$1.mid"; sleep 300 & echo $! > "$1"; wait' sh "$1" &
exec sleep 300`
	cmd := exec.Command("/bin/sh", "-c", script, "sh", filepath.Join(dir, "d"))
	tree, err := StartTree(cmd)
	if err != nil {
		t.Fatal(err)
	}
	mid, leaf := waitPid(t, filepath.Join(dir, "d.mid")), waitPid(t, filepath.Join(dir, "d"))
	if unix.Kill(mid, 0) != nil || unix.Kill(leaf, 0) != nil {
		t.Fatal("the daemon is not running")
	}
	time.AfterFunc(50*time.Millisecond, tree.Kill)
	err = tree.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Wait: %v, want killed", err)
	}
	assertGone(t, "child", tree.Pid())
	assertGone(t, "daemon", mid)
	assertGone(t, "daemon's child", leaf)
	tree.Kill() // after Wait: a no-op, never a signal to a reused pid
}

// An orphan that already exited is reaped, not left a zombie.
func TestTreeReapsZombieOrphan(t *testing.T) {
	needSetsid(t)
	pidfile := filepath.Join(t.TempDir(), "z.pid")
	script := `(setsid sh -c 'echo $$ > "$1"' sh "$1" &)
while [ ! -s "$1" ]; do sleep 0.01; done
sleep 0.1`
	tree, err := StartTree(exec.Command("/bin/sh", "-c", script, "sh", pidfile))
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.Wait(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, "orphan", waitPid(t, pidfile))
}

// A sweep touches neither a child another tree in flight waits for, nor a
// child this process started before the tree.
func TestTreeSparesOthers(t *testing.T) {
	needSetsid(t)
	foreign := exec.Command("sleep", "300")
	if err := foreign.Start(); err != nil {
		t.Fatal(err)
	}
	other, err := StartTree(exec.Command("sleep", "300"))
	if err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(t.TempDir(), "daemon.pid")
	tree, err := StartTree(exec.Command("/bin/sh", "-c", daemonize, "sh", pidfile))
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.Wait(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, "daemon", waitPid(t, pidfile))
	if unix.Kill(foreign.Process.Pid, 0) != nil || unix.Kill(other.Pid(), 0) != nil {
		t.Fatal("the sweep killed a process that was not its tree's")
	}
	select {
	case <-other.Exited():
		t.Fatal("the other tree's child exited")
	default:
	}
	// Both are still their owners' to reap.
	_ = foreign.Process.Kill()
	if err := foreign.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("foreign Wait: %v, want killed", err)
	}
	other.Kill()
	if err := other.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("other Wait: %v, want killed", err)
	}
}

// Stop gives SIGTERM a grace period, then SIGKILL.
func TestTreeStop(t *testing.T) {
	tree, err := StartTree(exec.Command("/bin/sh", "-c", `trap 'exit 7' TERM; sleep 300 & wait`))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the trap be set
	start := time.Now()
	tree.Stop(10 * time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop waited %v for a child that exits on SIGTERM", d)
	}
	var ee *exec.ExitError
	if err := tree.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("Wait: %v, want exit status 7", err)
	}
	if GroupAlive(tree.Pid()) {
		t.Error("group alive after Wait")
	}

	tree, err = StartTree(exec.Command("/bin/sh", "-c", `trap '' TERM; sleep 300`))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	start = time.Now()
	tree.Stop(100 * time.Millisecond)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("Stop gave up after %v, before its grace", d)
	}
	if err := tree.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("Wait: %v, want killed", err)
	}
}

func TestTreeStartError(t *testing.T) {
	if _, err := StartTree(exec.Command("/nonexistent/cmd")); err == nil {
		t.Fatal("no error")
	}
	if n := len(trees.roots); n != 0 {
		t.Fatalf("%d roots still registered", n)
	}
}
