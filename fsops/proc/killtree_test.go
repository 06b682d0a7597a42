package proc

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
	KillTree(cmd.Process.Pid)
	cmd.Wait()
	assertGone(t, "the top", cmd.Process.Pid)
	time.Sleep(100 * time.Millisecond) // the setsid shell is reaped by pid 1
	for _, pgid := range []int{cmd.Process.Pid, escaped} {
		if GroupAlive(pgid) {
			t.Errorf("group %d has live processes after KillTree", pgid)
		}
	}
}
