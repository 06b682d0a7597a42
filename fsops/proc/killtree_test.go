package proc

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestKillTree: a tree that forks as fast as it can, and a child in a
// session of its own, are all dead after one KillTree of the top.
func TestKillTree(t *testing.T) {
	needSetsid(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	cmd := exec.Command("sh", "-c", `setsid sh -c 'echo $$ > "$1"; while :; do sleep 30 & done' sh "$1" &
while :; do sleep 30 & done`, "sh", sub)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	escaped := waitPid(t, sub)
	time.Sleep(200 * time.Millisecond)
	KillTree(cmd.Process.Pid, -1)
	cmd.Wait()
	assertGone(t, "the top", cmd.Process.Pid)
	time.Sleep(100 * time.Millisecond) // the setsid shell is reaped by pid 1
	for _, pgid := range []int{cmd.Process.Pid, escaped} {
		if GroupAlive(pgid) {
			t.Errorf("group %d has live processes after KillTree", pgid)
		}
	}
}

// A tree whose top has ended and been reaped is not searched by number:
// its pid may already name an unrelated process (here one started in its
// place and given that number as the attack would have it), which must
// be left running, neither stopped nor killed.
func TestKillTreeReapedTop(t *testing.T) {
	gone := exec.Command("sleep", "60")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(gone.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	gone.Process.Kill()
	gone.Wait()
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	KillTree(other.Process.Pid, fd)
	time.Sleep(50 * time.Millisecond)
	st, ok := readStat(other.Process.Pid)
	if !ok || st.state == 'T' || st.state == 'Z' {
		t.Fatalf("the unrelated process was stopped or killed (state %q)", st.state)
	}
}
