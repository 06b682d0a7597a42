package sandbox

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
	"ctx/fsops/proc"
	"ctx/fsops/toolworker"
)

// A tool worker is the process of every brokered call of ctx's own tools
// (a builtin, an MCP-projected tool, ctx-hooked-tool): a ctx process the
// init starts from its locked thread like every tool process (the same
// walls, limits, credentials and process group rules), with a socket only
// the init holds, where it waits for its order (its own side is package
// toolworker). The init keeps one warm, started ahead of the next call; a
// call that finds none (calls at once, a worker stopped or dead) gets one
// started for it from the tool's own file. The init reports a worker's
// exit with what its tool reported, or the end of a call after which the
// worker stays (worker_watch.go).

// ToolWorkerApplet is the hidden applet a tool worker runs as.
const ToolWorkerApplet = toolworker.Applet

// toolWorker is a worker the init started: its pid and the init's end of
// its socket; final brings what its tool reported before it exited
// (worker_watch.go); cancelled, that a call it ran was cancelled.
type toolWorker struct {
	pid       int
	conn      *os.File
	final     <-chan *broker.WorkerMessage
	watched   bool
	cancelled bool
}

// startWorker starts the next warm worker from the calling (locked)
// thread, from the run's ctx binary. A failure only leaves the next call
// to start a worker of its own.
func (b *initBroker) startWorker() {
	if b.plan.Worker == "" || len(b.idle) > 0 {
		return
	}
	w, err := b.launchWorker(b.plan.Worker)
	if err != nil {
		b.plan.Worker = "" // it will not start next time either
		return
	}
	b.idle = append(b.idle, w)
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
		ExtraFiles: []*os.File{theirs}} // its toolworker.FD
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

// takeIdle takes an idle worker, nil when there is none that can take an
// order: one an agent process of the same uid stopped (SIGSTOP) to stall
// the next call is killed, and the call gets another.
func (b *initBroker) takeIdle() *toolWorker {
	for len(b.idle) > 0 {
		w := b.idle[len(b.idle)-1]
		b.idle = b.idle[:len(b.idle)-1]
		if !proc.Halted(w.pid) {
			return w
		}
		b.retire(w)
	}
	return nil
}

// dropIdle forgets the idle worker pid, which has died; false when pid
// is none.
func (b *initBroker) dropIdle(pid int) bool {
	for i, w := range b.idle {
		if w.pid == pid {
			w.conn.Close()
			b.idle = append(b.idle[:i], b.idle[i+1:]...)
			return true
		}
	}
	return false
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
	b.working[w.pid] = w
	if !w.watched {
		w.watched = b.watch(w)
	}
	return true
}

// retire kills a worker that will run no call; its exit is not reported.
func (b *initBroker) retire(w *toolWorker) {
	syscall.Kill(-w.pid, syscall.SIGKILL)
	w.conn.Close()
	b.retired[w.pid] = true
}
