package sandbox

import (
	"bytes"
	"ctx/fsops"
	"ctx/fsops/cgroup"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requireCgroup returns a run cgroup, or skips (fails under
// CTX_REQUIRE_SANDBOX as root) when none can be made here.
func requireCgroup(t *testing.T, lim cgroup.Limits) (*cgroup.Run, string) {
	t.Helper()
	name := "ctx-test-" + fsops.NewRunID()
	c, why := cgroup.New(name, lim, nil)
	if c == nil {
		if os.Getenv("CTX_REQUIRE_SANDBOX") != "" && os.Getuid() == 0 {
			t.Fatalf("a run cgroup is required (CTX_REQUIRE_SANDBOX) but: %s", why)
		}
		t.Skipf("no run cgroup here: %s", why)
	}
	t.Cleanup(func() { c.KillAll(); c.Remove() })
	return c, name
}

// TestInitJoinsRunCgroupItself: an init given the run cgroup's tasks files
// (cgroup v1) runs its program, and so every process of the run, inside
// the cgroup, keeps all its threads but the one that starts them outside,
// and leaves the cgroup before it reports the end: the cgroup can be
// removed at once, while the init is still exiting. (Without the leave,
// the thread's own exit usually comes soon enough too; the leave makes it
// certain. Without the join the test fails on the program's cgroups.)
func TestInitJoinsRunCgroupItself(t *testing.T) {
	requireSandbox(t)
	c, name := requireCgroup(t, cgroup.Limits{Pids: 64})
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
	hierarchies := len(files) / 2
	if err != nil || hierarchies == 0 || len(files)%2 != 0 {
		t.Fatalf("tasks files %d (a run's cgroup and its parent in each hierarchy): %v", len(files), err)
	}
	var dirs []string // the run's cgroup in each hierarchy: the first half's directories
	for _, f := range files[:hierarchies] {
		dirs = append(dirs, filepath.Dir(f.Name()))
	}
	sb.SetCgroupTasks(files)
	err = sb.Start()
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		if st, err := os.Stat(filepath.Join(ws, "cg")); err == nil && st.Size() > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "cg")); strings.Count(string(got), name) != hierarchies {
		t.Fatalf("the program's cgroups lack the run's %s in each of %d hierarchies:\n%s\n%s", name, hierarchies, got, out.String())
	}
	initPid := sb.Cmd.Process.Pid
	tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(initPid), "task"))
	inside := 0
	for _, task := range tasks {
		cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(initPid), "task", task.Name(), "cgroup"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(cg), name) {
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
	for _, dir := range dirs {
		if err := unix.Rmdir(dir); err != nil {
			t.Errorf("%s: the run's cgroup could not be removed right after the end report: %v", dir, err)
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
