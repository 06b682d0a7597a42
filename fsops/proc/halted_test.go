package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A process whose name imitates the fields after it ("x) T 1 (") is
// still read by its real state and parent: the fields are counted after
// the last parenthesis. A stopped process is halted, a sleeping one is
// not, and a process that is gone has no parent to tell.
func TestParentAndHaltedReadTheRealFields(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	fake := filepath.Join(t.TempDir(), "x) T 1 (")
	if err := os.Symlink(sleep, fake); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fake, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Process.Kill()
	time.Sleep(50 * time.Millisecond) // past its exec: its name is the fake one
	if got, ok := Parent(pid); !ok || got != os.Getpid() {
		t.Fatalf("Parent(%d) = %d, %v; want this test (%d)", pid, got, ok, os.Getpid())
	}
	if !Descends(pid, os.Getpid()) || Descends(os.Getpid(), pid) || Descends(pid, 1<<22) {
		t.Fatalf("Descends: a child is not below its parent, or the parent is below it")
	}
	if Halted(pid) {
		t.Fatal("a sleeping process is reported halted")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for i := 0; !Halted(pid); i++ {
		if i == 100 {
			t.Fatal("a stopped process is not reported halted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got, ok := Parent(pid); ok {
		t.Fatalf("a reaped process still has a parent: %d", got)
	}
}
