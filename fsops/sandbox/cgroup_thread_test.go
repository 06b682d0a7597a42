package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestInitJoinsRunCgroupItself: an init given the run cgroup's tasks files
// (cgroup v1) runs its program, and so every process of the run, inside
// the cgroup, keeps all its threads but the one that starts them outside,
// and leaves the cgroup before it reports the end: the cgroup can be
// removed at once, while the init is still exiting. (Without the leave,
// the thread's own exit usually comes soon enough too; the leave makes it
// certain. Without the join the test fails on the program's cgroups.)
func TestInitJoinsRunCgroupItself(t *testing.T) {
	requireSandbox(t)
	c := requireCgroup(t, CgroupLimits{Pids: 64})
	if c.Version != 1 {
		t.Skip("cgroup v2: a thread cannot be in another cgroup than its process, and the init is moved in whole")
	}
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	plan := testPlan(t, "uid", 65534, ws, "cat /proc/self/cgroup > /workspace/cg; sleep 0.5")
	sb, err := New(plan)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sb.Cmd.Stdout, sb.Cmd.Stderr = &out, &out
	files, err := c.ThreadTasksFiles()
	if err != nil || len(files) != 2*len(c.dirs) {
		t.Fatalf("tasks files %d for %d hierarchies: %v", len(files), len(c.dirs), err)
	}
	sb.SetCgroupTasks(files)
	err = sb.Start()
	closeFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(c.dirs[firstKey(c.dirs)])
	for i := 0; i < 500; i++ {
		if st, err := os.Stat(filepath.Join(ws, "cg")); err == nil && st.Size() > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "cg")); strings.Count(string(got), name) != len(c.dirs) {
		t.Fatalf("the program's cgroups lack the run's %s in each of %d hierarchies:\n%s\n%s", name, len(c.dirs), got, out.String())
	}
	initPid := sb.Cmd.Process.Pid
	tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(initPid), "task"))
	inside := 0
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if strings.Contains(cgroupsOf(t, initPid, tid), name) {
			inside++
		}
	}
	if inside != 1 || len(tasks) < 2 {
		t.Fatalf("%d of the init's %d threads are in the run's cgroup, want exactly one", inside, len(tasks))
	}
	if st, ok := <-sb.Ended(); !ok || st != 0 {
		t.Fatalf("the init reported %d (%v)\n%s", st, ok, out.String())
	}
	// At once, without waiting for the init's exit: the cgroup is empty.
	for ctl, dir := range c.dirs {
		if err := unix.Rmdir(dir); err != nil {
			t.Errorf("%s: the run's cgroup could not be removed right after the end report: %v", ctl, err)
		}
	}
	sb.Cmd.Wait()
}

// TestJoinRunCgroupRefusesBadCount: the init's cgroup-tasks=N is refused
// unless N is 1 to 8, before any descriptor is written to or kept: the
// file at the first tasks descriptor stays empty and no parent is kept.
func TestJoinRunCgroupRefusesBadCount(t *testing.T) {
	saved, err := unix.Dup(firstCgroupFD)
	if err == nil {
		defer func() { unix.Dup2(saved, firstCgroupFD); unix.Close(saved) }()
	} else {
		defer unix.Close(firstCgroupFD)
	}
	file := filepath.Join(t.TempDir(), "tasks")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, arg := range []string{"cgroup-tasks=0", "cgroup-tasks=9", "cgroup-tasks=-1", "cgroup-tasks=x", "cgroup-tasks="} {
		if err := unix.Dup2(int(f.Fd()), firstCgroupFD); err != nil {
			t.Fatal(err)
		}
		if err := joinRunCgroup([]string{InitApplet, arg}); err == nil || !strings.Contains(err.Error(), arg) {
			t.Errorf("%s: got %v, want a refusal naming it", arg, err)
		}
		if cgroupParents != nil {
			t.Errorf("%s: parents kept: %v", arg, cgroupParents)
		}
		if data, _ := os.ReadFile(file); len(data) != 0 {
			t.Fatalf("%s: the tasks file was written: %q", arg, data)
		}
	}
	if err := joinRunCgroup([]string{InitApplet}); err != nil || cgroupParents != nil {
		t.Fatalf("no cgroup-tasks: got %v, parents %v; want nothing done", err, cgroupParents)
	}
}
