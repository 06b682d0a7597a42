// Package cgroup makes, reads and removes the cgroup of one agent run.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// A run's cgroup holds every process of one agent run, so that the kernel
// enforces the run's memory and process budgets on all of them together
// and the run host can end them all at once. cgroup v2 is used where the
// caller may create a leaf (root, on a host whose unified hierarchy has
// the controllers); cgroup v1's pids, memory and cpuacct controllers, as
// root, where v2 has none. Without either, the run goes on with rlimits
// only, and New says why.

// Limits are the limits a run's cgroup enforces; 0 leaves one unset.
type Limits struct {
	MemoryBytes uint64
	Pids        uint64
}

// Run is the cgroup (v2: one directory; v1: one per controller) of
// one run.
type Run struct {
	Version int               // 2 or 1
	dirs    map[string]string // controller ("pids", "memory", "cpuacct", or "" for v2) -> directory
}

// Usage is what the run's cgroup reports.
type Usage struct {
	MemoryBytes uint64 // current memory use, with page cache and tmpfs
	Pids        uint64 // current processes and threads
	CPUNanos    uint64 // CPU time used by the run
	PidsMaxHits uint64 // forks refused at pids.max
	OOMKills    uint64 // processes killed at the memory limit
	Known       map[string]bool
}

// New makes the run's cgroup named name (a run id) with limits,
// in the hierarchies of the mount table infos (nil: read now). It returns
// nil and the reason when no cgroup can be made here.
func New(name string, lim Limits, infos []fsops.MountInfo) (*Run, string) {
	if infos == nil {
		infos, _ = fsops.ReadMountInfo()
	}
	mounts := cgroupMountsOf(infos)
	var why2 string
	if c, err := newRunCgroup2(name, lim, cgroup2MountOf(mounts)); err == nil {
		return c, ""
	} else {
		why2 = err.Error()
	}
	c, err := newRunCgroup1(name, lim, cgroup1MountsOf(mounts))
	if err == nil {
		return c, ""
	}
	return nil, "cgroup2: " + why2 + "; cgroup1: " + err.Error()
}

// newRunCgroup2 makes CGROUPFS/ctx/NAME (the unified hierarchy mounted at
// mount, "" for none) with memory.max and pids.max, the
// controllers enabled on the way down from the unified root. It needs
// write access to the hierarchy's top (root).
func newRunCgroup2(name string, lim Limits, mount string) (*Run, error) {
	if mount == "" {
		return nil, errors.New("no cgroup2 hierarchy mounted")
	}
	controllers, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	have := strings.Fields(string(controllers))
	for _, want := range []string{"memory", "pids"} {
		if !slices.Contains(have, want) {
			return nil, fmt.Errorf("the unified hierarchy has no %s controller", want)
		}
	}
	enable := "+memory +pids"
	if slices.Contains(have, "cpu") {
		enable += " +cpu"
	}
	if err := os.WriteFile(filepath.Join(mount, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		return nil, fmt.Errorf("enabling controllers: %w", err)
	}
	parent := filepath.Join(mount, "ctx")
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		return nil, fmt.Errorf("enabling controllers: %w", err)
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	c := &Run{Version: 2, dirs: map[string]string{"": dir}}
	if err := c.setLimits(lim); err != nil {
		c.Remove()
		return nil, err
	}
	return c, nil
}

// newRunCgroup1 makes a child of this process's own cgroup in the v1
// pids, memory and cpuacct hierarchies (mounts: cgroup1Mounts) (v1 has no rule against children of
// a cgroup with processes).
func newRunCgroup1(name string, lim Limits, mounts map[string]string) (*Run, error) {
	own := ownCgroups1()
	c := &Run{Version: 1, dirs: map[string]string{}}
	for _, ctl := range []string{"pids", "memory", "cpuacct"} {
		mount, ok := mounts[ctl]
		if !ok {
			if ctl == "cpuacct" {
				continue // usage only
			}
			c.Remove()
			return nil, fmt.Errorf("no v1 %s hierarchy", ctl)
		}
		dir := filepath.Join(mount, own[ctl], name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			c.Remove()
			return nil, fmt.Errorf("%s: %w", ctl, err)
		}
		c.dirs[ctl] = dir
	}
	if err := c.setLimits(lim); err != nil {
		c.Remove()
		return nil, err
	}
	return c, nil
}

func (c *Run) file(ctl, v2name, v1name string) string {
	if c.Version == 2 {
		return filepath.Join(c.dirs[""], v2name)
	}
	if d, ok := c.dirs[ctl]; ok {
		return filepath.Join(d, v1name)
	}
	return ""
}

func (c *Run) setLimits(lim Limits) error {
	if lim.Pids > 0 {
		if err := os.WriteFile(c.file("pids", "pids.max", "pids.max"), []byte(strconv.FormatUint(lim.Pids, 10)), 0); err != nil {
			return fmt.Errorf("pids.max: %w", err)
		}
	}
	if lim.MemoryBytes > 0 {
		if err := os.WriteFile(c.file("memory", "memory.max", "memory.limit_in_bytes"), []byte(strconv.FormatUint(lim.MemoryBytes, 10)), 0); err != nil {
			return fmt.Errorf("memory limit: %w", err)
		}
		if c.Version == 2 {
			// No swap beyond the limit either: memory_bytes is what the
			// run may hold.
			os.WriteFile(c.file("memory", "memory.swap.max", ""), []byte("0"), 0)
		}
	}
	return nil
}

// StartInside calls start (which forks the run's first process) on a
// thread that is inside the run's cgroup for that moment, so that the
// process is born there, and reports whether it was. Otherwise the caller
// moves the process in with Add.
//
// Why: moving another process (Add) takes the kernel's global
// threadgroup lock for writing, and its first taking in a process waits
// for an RCU grace period, the largest single wait of an agent start. A
// thread that moves itself (v1: "0" written to tasks) skips that lock,
// and a fork inherits the forking thread's cgroups. Only v1 is done this
// way; v2 would use clone3's CLONE_INTO_CGROUP, which no host here can
// test, so it keeps Add.
//
// While inside, the thread counts toward the run's pids.max and is listed
// in its cgroup.procs (by this process's id); nothing reads them before
// the run's first process exists. If the thread cannot move back, it is
// not returned to the Go runtime: it ends with the goroutine, locked, and
// the process it forked dies with it (its parent-death signal follows the
// forking thread), so such a run fails closed rather than run with the
// run host inside its cgroup.
func (c *Run) StartInside(start func() error) (inside bool, err error) {
	if c.Version != 1 {
		return false, start()
	}
	type result struct {
		inside bool
		err    error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		var moved []string
		for ctl, dir := range c.dirs {
			if os.WriteFile(filepath.Join(dir, "tasks"), []byte("0"), 0) != nil {
				break
			}
			moved = append(moved, ctl)
		}
		inside := len(moved) == len(c.dirs)
		var err error
		if inside {
			err = start()
		}
		for _, ctl := range moved {
			if os.WriteFile(filepath.Join(filepath.Dir(c.dirs[ctl]), "tasks"), []byte("0"), 0) != nil {
				done <- result{inside, err}
				return // locked: the thread ends here, inside
			}
		}
		runtime.UnlockOSThread()
		if !inside {
			err = start()
		}
		done <- result{inside, err}
	}()
	r := <-done
	return r.inside, r.err
}

// Add moves pid (the sandbox's init, before it starts the agent) into the
// run's cgroup; its children are born there.
func (c *Run) Add(pid int) error {
	p := []byte(strconv.Itoa(pid))
	for ctl, dir := range c.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), p, 0); err != nil {
			return fmt.Errorf("cgroup %s: %w", ctl, err)
		}
	}
	return nil
}

// Usage reads the run's current use and the kernel's refusal counters.
func (c *Run) Usage() Usage {
	u := Usage{Known: map[string]bool{}}
	read := func(path string) (string, bool) {
		if path == "" {
			return "", false
		}
		b, err := fsops.ReadControl(path)
		if err != nil {
			return "", false
		}
		return strings.TrimSpace(string(b)), true
	}
	num := func(key string, dst *uint64, path string) {
		if s, ok := read(path); ok {
			if n, err := strconv.ParseUint(s, 10, 64); err == nil {
				*dst, u.Known[key] = n, true
			}
		}
	}
	field := func(key string, dst *uint64, path, name string) {
		if s, ok := read(path); ok {
			for _, line := range strings.Split(s, "\n") {
				f := strings.Fields(line)
				if len(f) == 2 && f[0] == name {
					if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
						*dst, u.Known[key] = n, true
					}
				}
			}
		}
	}
	num("pids", &u.Pids, c.file("pids", "pids.current", "pids.current"))
	field("pids_max_hits", &u.PidsMaxHits, c.file("pids", "pids.events", "pids.events"), "max")
	if c.Version == 2 {
		num("memory", &u.MemoryBytes, c.file("memory", "memory.current", ""))
		field("oom_kills", &u.OOMKills, c.file("memory", "memory.events", ""), "oom_kill")
		var usec uint64
		field("cpu", &usec, c.file("", "cpu.stat", ""), "usage_usec")
		u.CPUNanos = usec * 1000
	} else {
		num("memory", &u.MemoryBytes, c.file("memory", "", "memory.usage_in_bytes"))
		field("oom_kills", &u.OOMKills, c.file("memory", "", "memory.oom_control"), "oom_kill")
		num("cpu", &u.CPUNanos, c.file("cpuacct", "", "cpuacct.usage"))
	}
	return u
}

// KillAll kills every process in the run's cgroup, again until none is
// left (a fork racing the kill), for at most about a second.
func (c *Run) KillAll() {
	if c.Version == 2 {
		if os.WriteFile(filepath.Join(c.dirs[""], "cgroup.kill"), []byte("1"), 0) == nil {
			c.waitEmpty()
			return
		}
	}
	for i := 0; i < 100; i++ {
		pids := c.procs()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *Run) waitEmpty() {
	for i := 0; i < 100 && len(c.procs()) > 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *Run) procs() []int {
	var out []int
	for _, dir := range c.dirs {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		break // every hierarchy holds the same processes
	}
	return out
}

// Remove removes the run's cgroup directories (empty once its processes
// are gone).
func (c *Run) Remove() {
	for _, dir := range c.dirs {
		for i := 0; i < 50; i++ {
			if err := unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// CountsCPU reports whether the cgroup accounts the run's CPU time.
func (c *Run) CountsCPU() bool {
	if c.Version == 2 {
		return true
	}
	_, ok := c.dirs["cpuacct"]
	return ok
}

// Describe names the mechanism for /mnt/proc/budgets: cgroup2 or cgroup1.
func (c *Run) Describe() string {
	return "cgroup" + strconv.Itoa(c.Version)
}

// cgroup2Mount is where the unified hierarchy is mounted, "" if nowhere.
func cgroup2Mount() string { return cgroup2MountOf(cgroupMounts()) }

func cgroup2MountOf(mounts []cgroupMount) string {
	for _, m := range mounts {
		if m.fstype == "cgroup2" {
			return m.dir
		}
	}
	return ""
}

// cgroup1Mounts maps each v1 controller to its hierarchy's mount point.
func cgroup1Mounts() map[string]string { return cgroup1MountsOf(cgroupMounts()) }

func cgroup1MountsOf(mounts []cgroupMount) map[string]string {
	out := map[string]string{}
	for _, m := range mounts {
		if m.fstype != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(m.superOpts, ",") {
			if _, ok := out[opt]; !ok {
				out[opt] = m.dir
			}
		}
	}
	return out
}

type cgroupMount struct{ dir, fstype, superOpts string }

func cgroupMounts() []cgroupMount {
	infos, err := fsops.ReadMountInfo()
	if err != nil {
		return nil
	}
	return cgroupMountsOf(infos)
}

// cgroupMountsOf are the cgroup hierarchies of a mount table (their roots
// mounted: not a cgroup namespace's view of another's).
func cgroupMountsOf(infos []fsops.MountInfo) []cgroupMount {
	var out []cgroupMount
	for _, m := range infos {
		if (m.FSType != "cgroup" && m.FSType != "cgroup2") || m.Root != "/" {
			continue
		}
		out = append(out, cgroupMount{dir: m.Target, fstype: m.FSType, superOpts: m.SuperOpts})
	}
	return out
}

// ownCgroups1 maps each v1 controller to this process's cgroup path in it.
func ownCgroups1() map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out
}
