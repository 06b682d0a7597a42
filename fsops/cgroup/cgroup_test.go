package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ctx/fsops"
)

// requireCgroup returns a run cgroup, or skips (fails under
// CTX_REQUIRE_SANDBOX as root) when none can be made here.
func requireCgroup(t *testing.T, lim Limits) *Run {
	t.Helper()
	c, why := New("ctx-test-"+fsops.NewRunID(), lim, nil)
	if c == nil {
		if os.Getenv("CTX_REQUIRE_SANDBOX") != "" && os.Getuid() == 0 {
			t.Fatalf("a run cgroup is required (CTX_REQUIRE_SANDBOX) but: %s", why)
		}
		t.Skipf("no run cgroup here: %s", why)
	}
	t.Cleanup(func() { c.KillAll(); c.Remove() })
	return c
}

// cgroupsOf is /proc/PID/task/TID/cgroup (or /proc/PID/cgroup when tid is
// 0), one line per hierarchy.
func cgroupsOf(t *testing.T, pid, tid int) string {
	t.Helper()
	p := filepath.Join("/proc", strconv.Itoa(pid), "cgroup")
	if tid != 0 {
		p = filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(tid), "cgroup")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The run's first process is born inside the run's cgroup (no Add), and
// no thread of the starting process stays there: the run host must never
// be in the cgroup that KillAll empties.
func TestStartInsideBornInRunCgroup(t *testing.T) {
	c := requireCgroup(t, Limits{Pids: 64})
	cmd := exec.Command("/bin/sleep", "30")
	inside, err := c.StartInside(cmd.Start)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	name := filepath.Base(c.dirs[firstKey(c.dirs)])
	if c.Version == 1 && !inside {
		t.Fatalf("cgroup v1: the first process was not started inside")
	}
	if !inside {
		if err := c.Add(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	for ctl := range c.dirs {
		got := cgroupsOf(t, cmd.Process.Pid, 0)
		if !strings.Contains(got, name) {
			t.Fatalf("child's cgroups lack the run's (%s, %s):\n%s", ctl, name, got)
		}
	}
	tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(os.Getpid()), "task"))
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if got := cgroupsOf(t, os.Getpid(), tid); strings.Contains(got, name) {
			t.Fatalf("thread %d of the starting process stayed in the run's cgroup:\n%s", tid, got)
		}
	}
	procs := c.procs()
	if len(procs) != 1 || procs[0] != cmd.Process.Pid {
		t.Fatalf("run cgroup holds %v, want only the child %d", procs, cmd.Process.Pid)
	}
}

// A start that fails leaves nothing in the cgroup and the thread back home.
func TestStartInsideFailedStart(t *testing.T) {
	c := requireCgroup(t, Limits{Pids: 64})
	cmd := exec.Command(filepath.Join(t.TempDir(), "missing"))
	if _, err := c.StartInside(cmd.Start); err == nil {
		t.Fatal("starting a missing program succeeded")
	}
	if procs := c.procs(); len(procs) != 0 {
		t.Fatalf("run cgroup holds %v after a failed start", procs)
	}
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}
