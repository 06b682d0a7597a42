// Package proc is ctx's one process runner: a child started in its own
// process group as a tree that ends whole (StartTree), the capped buffer
// its output goes to (Capped), the one mapping from a wait status to a
// shell-style exit code (ExitCode, Signaled) and the one $PATH search
// (LookPath). It imports nothing of ctx, so fsops, mcpstdio, ptyterm and
// every applet (applets/cli included) can use it.
package proc

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A child tree is one process ctx starts (a shell.exec command, a tool
// hook, a queue job, an MCP server, a tool served over MCP) with every
// process it starts in turn. When ctx is done with the child, the whole
// tree ends, and is reaped, before ctx goes on.
//
// The child leads its own process group, but a group is no fence: a
// descendant may setsid (or setpgid) and double fork, leaving a daemon in
// another session whose parent died. So:
//
//   - ctx makes itself a child subreaper (PR_SET_CHILD_SUBREAPER) before it
//     starts a tree. An orphaned descendant is then reparented to ctx, not
//     to init: it stays a child of ours, which we can find, kill and reap.
//   - When the child has exited (on its own, or killed on a timeout or a
//     cancel), Wait kills its process group and then sweeps: it lists our
//     own children (/proc/self/task/*/children, every thread), takes those
//     that are orphans of a tree (see below), SIGKILLs each with all its
//     descendants (read from /proc/PID/task/*/children; without those
//     files, from one scan of /proc/*/stat a round), and reaps them with
//     wait4. Killed processes reparent their children to us, so the
//     sweep repeats until two rounds in a row find nothing, or sweepLimit.
//
// An orphan is a child of ours that we did not start through StartTree
// and that was not already our child when this tree started. The roots of
// trees still in flight are registered here, so a sweep never kills or
// reaps a child another tree's exec.Cmd waits for (and a root is started
// and registered under the same lock a sweep holds, so no sweep sees it
// unregistered). The orphans of another tree in flight cannot be told
// from ours once their parent is gone: a sweep ends them too, which only
// ends early what would end with that tree anyway.
//
// Pids: a pid is reused only once its process is reaped. Our children,
// orphans included, are reaped by nobody but us (zombies hold their pid),
// and the leader of the group is reaped (cmd.Wait) only after the group
// was killed, so those signals cannot reach a stranger. A deeper
// descendant is listed from its parent's children file and its parent is
// killed right after: a parent with SIGKILL pending reaps nothing, so the
// listed pids stay theirs. What remains racy:
//
//   - between reading a process's children and killing it, it could reap
//     a child and the kernel hand that pid to an unrelated process; that
//     takes cycling through the whole pid space within microseconds;
//   - a process that forks and exits while a round reads /proc can be
//     missed by that round; the next round finds it (hence two clean
//     rounds), unless the tree outruns sweepLimit;
//   - a process started outside StartTree by this same process (another
//     os/exec user) while a tree runs looks like an orphan, and would be
//     killed and reaped under its owner. Processes that run trees start
//     their other children before, or not at all;
//   - if ctx itself dies (SIGKILL) its subreaper role dies with it, and a
//     tree's orphans go to init; a runner that must cover that sets
//     Pdeathsig on the child, which ends the child but not its daemons;
//   - without the subreaper (prctl refused) or without /proc, only the
//     group kill is left.
type ChildTree struct {
	cmd    *exec.Cmd
	pid    int
	before map[int]uint64 // our children (pid -> start time) when the tree started
	exited chan struct{}  // closed when the child has exited (not yet reaped)

	mu     sync.Mutex // orders signals before the reap
	reaped bool

	waitOnce sync.Once
	err      error
}

// sweepLimit bounds the sweep. A killed process dies in microseconds; the
// bound only matters for one that cannot die (uninterruptible sleep) or a
// tree that forks faster than we kill, and then what is left stays.
const sweepLimit = time.Second

// trees registers the roots of the trees in flight: pids that our
// exec.Cmds own and wait for, which a sweep must never touch.
var trees = struct {
	sync.Mutex
	roots map[int]bool
}{roots: map[int]bool{}}

var subreaper sync.Once

// StartTree starts cmd as the root of a child tree: in its own process
// group (Setpgid, unless cmd asks for Setsid, which also makes it a group
// leader), with this process made a child subreaper first. The caller must
// call Wait, which ends the tree, instead of cmd.Wait.
func StartTree(cmd *exec.Cmd) (*ChildTree, error) {
	subreaper.Do(func() {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) // best effort: see ChildTree
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setsid {
		cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pgid = true, 0
	}
	// If this process dies before it could end the tree (killed: a client
	// that gives up on ctxmcp serve), its subreaper role dies with it and
	// the tree would go to init: the root is killed instead, and a root
	// that is ctx (a projected tool) takes its own tree down the same way.
	// The death signal follows the thread that forks: it is locked for the
	// fork, and Go retires a thread only when a goroutine exits locked to it.
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	trees.Lock()
	defer trees.Unlock()
	before := map[int]uint64{}
	for _, pid := range children(os.Getpid(), nil) {
		if st, ok := readStat(pid); ok {
			before[pid] = st.start
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	t := &ChildTree{cmd: cmd, pid: cmd.Process.Pid, before: before, exited: make(chan struct{})}
	trees.roots[t.pid] = true
	go t.watch()
	return t, nil
}

// watch waits for the child to exit without reaping it (WNOWAIT): until
// Wait reaps it, its pid, and so its group id, cannot be reused.
func (t *ChildTree) watch() {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, t.pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	close(t.exited)
}

// Pid is the child's pid, which is also its process group id.
func (t *ChildTree) Pid() int { return t.pid }

// Exited is closed when the child has exited; the rest of its tree may
// still run until Wait.
func (t *ChildTree) Exited() <-chan struct{} { return t.exited }

// signal sends sig to the child's process group and to the child itself
// (which may have moved to another group), until Wait reaps the child.
func (t *ChildTree) signal(sig unix.Signal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reaped {
		return
	}
	_ = unix.Kill(-t.pid, sig)
	_ = unix.Kill(t.pid, sig)
}

// Kill sends SIGKILL to the child and its process group; Wait then ends
// the rest of the tree. It may be called at any time, from any goroutine
// (a timer), also after Wait returned.
func (t *ChildTree) Kill() { t.signal(unix.SIGKILL) }

// Stop asks the child and its group to end: SIGTERM, up to grace for the
// child to exit and its group to empty, then SIGKILL.
func (t *ChildTree) Stop(grace time.Duration) {
	t.signal(unix.SIGTERM)
	for deadline := time.Now().Add(grace); time.Now().Before(deadline) && !t.quiet(); {
		time.Sleep(5 * time.Millisecond)
	}
	t.signal(unix.SIGKILL)
}

// quiet reports whether the child has exited and its group is empty.
func (t *ChildTree) quiet() bool {
	select {
	case <-t.exited:
		return !GroupAlive(t.pid)
	default:
		return false
	}
}

// Wait waits for the child to exit, then ends its tree: SIGKILL to its
// process group, the sweep of its orphans and their descendants, and
// finally cmd.Wait, whose error it returns (cmd.ProcessState is set as
// usual). Since every writer is dead by then, cmd.Wait does not wait for
// output copies held open by a daemon.
func (t *ChildTree) Wait() error {
	t.waitOnce.Do(func() {
		<-t.exited
		_ = unix.Kill(-t.pid, unix.SIGKILL) // the unreaped leader holds the group id
		t.sweep()
		t.mu.Lock()
		t.reaped = true
		t.mu.Unlock()
		t.err = t.cmd.Wait()
		trees.Lock()
		delete(trees.roots, t.pid)
		trees.Unlock()
	})
	return t.err
}

// sweep repeats rounds until two in a row find nothing (a process may be
// reparented to us while a round reads), or sweepLimit passes.
func (t *ChildTree) sweep() {
	deadline := time.Now().Add(sweepLimit)
	pause := 500 * time.Microsecond
	for clean := 0; clean < 2 && time.Now().Before(deadline); {
		if t.sweepRound() {
			clean = 0
		} else {
			clean++
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// sweepRound kills every orphan (see ChildTree) with its descendants and
// reaps the orphans that are dead. It reports whether it found any.
func (t *ChildTree) sweepRound() bool {
	trees.Lock()
	defer trees.Unlock()
	var table map[int][]int // the fallback without children files
	if !childrenFiles() {
		table = ScanParents()
	}
	found := false
	seen := map[int]bool{}
	for _, pid := range children(os.Getpid(), table) {
		if trees.roots[pid] {
			continue
		}
		if start, ok := t.before[pid]; ok {
			// Not ours if it is the same process (or it is gone: then its
			// owner reaped it, and its pid is free for anyone).
			if st, ok := readStat(pid); !ok || st.start == start {
				continue
			}
		}
		found = true
		var ws unix.WaitStatus
		if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid {
			continue // it was a zombie: reaped
		}
		killDescending(pid, table, seen)
	}
	return found
}

// killDescending SIGKILLs pid and everything below it, reading a process's
// children before killing it (a dead process has none: they move to us).
func killDescending(pid int, table map[int][]int, seen map[int]bool) {
	signalDescending(pid, unix.SIGKILL, table, seen)
}

var (
	childrenOnce sync.Once
	hasChildren  bool
)

// childrenFiles reports whether the kernel has /proc/PID/task/TID/children
// (CONFIG_PROC_CHILDREN); without them, ScanParents reads all of /proc.
func childrenFiles() bool {
	childrenOnce.Do(func() {
		_, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children")
		hasChildren = err == nil
	})
	return hasChildren
}

// children lists the children of pid: from table when it is not nil, else
// from the children file of each of its threads (a child is listed under
// the thread that forked it, or the one it was reparented to).
func children(pid int, table map[int][]int) []int {
	if table != nil || !childrenFiles() {
		if table == nil {
			table = ScanParents()
		}
		return table[pid]
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids, err := readNames(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile(dir + tid + "/children")
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if n, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func readNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// procStat is what we use of /proc/PID/stat.
type procStat struct {
	ppid, pgid int
	state      byte   // 'R', 'S', 'Z', ...
	start      uint64 // clock ticks after boot
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// "pid (comm) state ppid pgrp ... starttime ...": comm may hold spaces
	// and parentheses, so the fields are counted after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) == 0 {
		return procStat{}, false
	}
	var st procStat
	st.state = f[0][0]
	st.ppid, _ = strconv.Atoi(string(f[1]))
	st.pgid, _ = strconv.Atoi(string(f[2]))
	st.start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	return st, true
}

// scanProcs calls fn for every process in /proc.
func scanProcs(fn func(pid int, st procStat)) {
	names, _ := readNames("/proc")
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			fn(pid, st)
		}
	}
}

// ScanParents maps each pid to its children, from one pass over /proc
// (the sandbox init signals its own descendants from it).
func ScanParents() map[int][]int {
	out := map[int][]int{}
	scanProcs(func(pid int, st procStat) { out[st.ppid] = append(out[st.ppid], pid) })
	return out
}

// GroupAlive reports whether a process of group pgid is still running
// (zombies do not count: they are dead and only wait to be reaped).
func GroupAlive(pgid int) bool {
	alive := false
	scanProcs(func(_ int, st procStat) {
		if st.pgid == pgid && st.state != 'Z' && st.state != 'X' {
			alive = true
		}
	})
	return alive
}
