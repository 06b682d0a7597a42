package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
	"ctx/fsops/proc"
)

// A tool worker is the process of every brokered call of ctx's own tools
// (a builtin, an MCP-projected tool, ctx-hooked-tool): a ctx process the
// sandbox init starts, from its locked thread like every tool process (the
// same walls, limits, credentials and process group rules), with a socket
// only the init holds, on which it waits for one order. Given the order it
// becomes the tool process exactly as an execve of the tool's file would
// have made it (the caller's descriptors as 0-2, the call's arguments,
// environment and directory) and runs the call; before it exits it sends
// on the same socket what only it knows of the call (its errno, layer and
// detail), and the init adds that to the exit it reports. The order is the
// process's only reason to believe the run host decided the call: nothing
// in its environment says so. The init keeps one worker warm, started
// ahead of the next call, so that a call does not wait for Go's start-up;
// a call that finds none (calls at once, a worker stopped or dead) gets
// one started for it from the tool's own file. One call per worker: it
// exits when the tool does, and the init starts the next one.

// ToolWorkerApplet is the hidden applet a tool worker runs as.
const ToolWorkerApplet = "ctx-tool-worker"

// workerFD is the worker's end of its socket to the init.
const workerFD = 3

// toolWorker is a worker the init started: its pid and the init's end of
// its socket.
type toolWorker struct {
	pid  int
	conn *os.File
}

// startWorker starts the next warm worker from the calling (locked)
// thread, from the run's ctx binary. A failure only leaves the next call
// to start a worker of its own.
func (b *initBroker) startWorker() {
	if b.plan.Worker == "" || b.worker != nil {
		return
	}
	w, err := b.launchWorker(b.plan.Worker)
	if err != nil {
		b.plan.Worker = "" // it will not start next time either
		return
	}
	b.worker = w
}

// launchWorker starts a tool worker from the ctx binary at path, as the
// agent, in a process group of its own.
func (b *initBroker) launchWorker(path string) (*toolWorker, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "worker"), os.NewFile(uintptr(fds[1]), "worker-end")
	defer theirs.Close()
	cmd := &exec.Cmd{Path: path, Args: []string{ToolWorkerApplet}, Env: []string{}, Dir: "/",
		ExtraFiles: []*os.File{theirs}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: agentCredential(b.plan)}
	if err := cmd.Start(); err != nil {
		mine.Close()
		return nil, err
	}
	return &toolWorker{pid: cmd.Process.Pid, conn: mine}, nil
}

// runInWorker has a tool worker run an exec order of ctx's own process:
// the idle warm worker when it can take it, else one started for the
// order from the tool's file (an execve of that file would have run it
// the same way). A worker that cannot start is reported as an execve that
// failed (126, 127 when not found).
func (b *initBroker) runInWorker(o broker.Order, files []*os.File) {
	if len(files) < 3 || len(o.Argv) == 0 {
		b.report(broker.InitReport{Op: broker.OpExit, ID: o.ID, Status: proc.ExitInternal, Error: "an exec order without three descriptors"})
		return
	}
	if w := b.takeIdle(); w != nil && b.give(w, o, files) {
		return
	}
	w, err := b.launchWorker(o.Path)
	if err != nil {
		b.report(broker.InitReport{Op: broker.OpExit, ID: o.ID, Status: proc.StartFailure(err), Error: err.Error()})
		return
	}
	if !b.give(w, o, files) {
		b.report(broker.InitReport{Op: broker.OpExit, ID: o.ID, Status: proc.ExitNotExec, Error: "the tool worker did not take the call"})
	}
}

// takeIdle takes the idle worker, nil when there is none or it cannot
// take an order: an agent process of the same uid stopped it (SIGSTOP) to
// stall the next call; it is killed and the call gets a worker of its own.
func (b *initBroker) takeIdle() *toolWorker {
	w := b.worker
	b.worker = nil
	if w != nil && workerStopped(w.pid) {
		b.retire(w)
		return nil
	}
	return w
}

// give hands order o and the call's descriptors to worker w; false when
// it cannot take them (it died), after retiring it.
func (b *initBroker) give(w *toolWorker, o broker.Order, files []*os.File) bool {
	var fds []int
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	if err := broker.Send(int(w.conn.Fd()), o, fds); err != nil {
		b.retire(w)
		return false
	}
	b.byPid[w.pid] = o.ID
	b.pgid[o.ID] = w.pid
	b.working[w.pid] = w.conn
	return true
}

// retire kills a worker that will run no call; its exit is not reported.
func (b *initBroker) retire(w *toolWorker) {
	syscall.Kill(-w.pid, syscall.SIGKILL)
	w.conn.Close()
	b.retired[w.pid] = true
}

// toolReport is what the tool process on conn reported of its call
// before it exited, nil when it reported nothing.
func toolReport(conn *os.File) *broker.Report {
	var rep broker.Report
	if broker.RecvQueued(int(conn.Fd()), &rep) != nil {
		return nil
	}
	return &rep
}

// workerStopped reports whether the idle worker pid cannot take an order
// now: stopped or traced (state T or t), or dead (Z, X), as the init's
// /proc shows it. An idle worker sleeps in its receive (S); one still
// starting runs (R) or waits on a page (D), and takes the order when it
// gets there.
func workerStopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false // no /proc to ask: a dead worker fails the send instead
	}
	// pid (comm) state ...: comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	switch b[i+2] {
	case 'T', 't', 'Z', 'X', 'x':
		return true
	}
	return false
}

// WorkerCall is the call a tool worker was ordered to run, once
// WorkerOrder has made the process its tool process.
type WorkerCall struct {
	Argv []string
	// HostOps is the call's host-operation channel, when the host passed
	// one (the agent.* tools ask their host operation on it), else nil.
	HostOps  *os.File
	reported bool
}

// Report tells the init what only the tool knows of its call, once,
// before the process exits: the init reports it with the exit.
func (c *WorkerCall) Report(rep broker.Report) {
	if !c.reported {
		c.reported = true
		broker.Send(workerFD, rep, nil)
	}
}

// WorkerOrder waits, in a tool worker, for its one order and makes the
// process the tool process the order describes: the passed descriptors
// become 0, 1 and 2, the order's environment and directory the process's.
// It returns the call, or an exit status when the order cannot be carried
// out (126, as an execve that failed; 0 when the init went away before
// giving one).
func WorkerOrder() (call *WorkerCall, status int) {
	// Not dumpable while it waits: no agent process may trace it. Its
	// socket is kept, for the report, but never inherited.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	unix.CloseOnExec(workerFD)
	var o broker.Order
	files, err := broker.Recv(workerFD, &o, 4)
	if err != nil || len(files) < 3 || len(o.Argv) == 0 {
		for _, f := range files {
			f.Close()
		}
		if err == broker.ErrClosed {
			return nil, 0
		}
		return nil, proc.ExitNotExec
	}
	call = &WorkerCall{Argv: o.Argv}
	if len(files) > 3 {
		call.HostOps = files[3]
	}
	// 0-2 the caller's.
	for i, f := range files[:3] {
		if err := unix.Dup3(int(f.Fd()), i, 0); err != nil {
			return nil, proc.ExitNotExec
		}
		f.Close()
	}
	// The standard files are opened afresh on the new descriptors (a
	// nonblocking pipe gets the poller, as at a process's start); the old
	// ones are kept so their finalizers never close the new 0-2.
	retiredStd = append(retiredStd, os.Stdin, os.Stdout, os.Stderr)
	os.Stdin = os.NewFile(0, "/dev/stdin")
	os.Stdout = os.NewFile(1, "/dev/stdout")
	os.Stderr = os.NewFile(2, "/dev/stderr")
	if err := os.Chdir(o.Cwd); err != nil {
		os.Stderr.WriteString("ctx: " + err.Error() + "\n")
		return nil, proc.ExitNotExec
	}
	os.Clearenv()
	for _, kv := range o.Env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				os.Setenv(kv[:i], kv[i+1:])
				break
			}
		}
	}
	os.Args = o.Argv
	// From here on it is the tool process, dumpable as after an execve.
	unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	return call, -1
}

// retiredStd are the standard files a worker had before its order.
var retiredStd []*os.File
