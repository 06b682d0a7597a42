package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
)

// A warm tool worker is a ctx process the sandbox init starts ahead of a
// brokered call of a builtin tool: it has paid Go's start-up already and
// waits for one order on a socket only the init holds. Given the order it
// becomes the tool process exactly as an execve of the tool's file would
// have made it (the caller's descriptors as 0-2, the call's arguments,
// environment and directory) and runs the applet in its own process. It is
// started from the init's locked thread like every tool process, so it
// carries the same walls, limits, credentials and process group rules, and
// the init reaps it and reports its exit like any other. One call per
// worker: it exits when the tool does, and the init starts the next one.
// Only a builtin tool whose file is the run's own ctx binary takes this way
// (the host checks); everything else is executed as before.

// ToolWorkerApplet is the hidden applet a warm worker runs as.
const ToolWorkerApplet = "ctx-tool-worker"

// workerFD is the worker's end of its order socket.
const workerFD = 3

// toolWorker is the idle worker an init keeps, if any.
type toolWorker struct {
	pid  int
	conn *os.File // the init's end
}

// startWorker starts the next warm worker from the calling (locked) thread.
// A failure only leaves the next call to be executed cold.
func (b *initBroker) startWorker() {
	if b.plan.Worker == "" || b.worker != nil {
		return
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "worker"), os.NewFile(uintptr(fds[1]), "worker-end")
	defer theirs.Close()
	cmd := &exec.Cmd{Path: b.plan.Worker, Args: []string{ToolWorkerApplet}, Env: []string{}, Dir: "/",
		ExtraFiles: []*os.File{theirs}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: agentCredential(b.plan)}
	if err := cmd.Start(); err != nil {
		mine.Close()
		b.plan.Worker = "" // it will not start next time either
		return
	}
	b.worker = &toolWorker{pid: cmd.Process.Pid, conn: mine}
}

// giveWorker hands an exec order to the idle worker; false when there is
// none or it cannot take it (it died: the order is executed cold).
func (b *initBroker) giveWorker(o broker.Order, files []*os.File) bool {
	w := b.worker
	if w == nil {
		return false
	}
	b.worker = nil
	defer w.conn.Close()
	if workerStopped(w.pid) {
		// An agent process of the same uid stopped it (SIGSTOP) to
		// stall the next call: it is killed and the call runs cold.
		syscall.Kill(-w.pid, syscall.SIGKILL)
		b.retired[w.pid] = true
		return false
	}
	o.Env = append(o.Env, broker.BrokeredEnv+"=1")
	var fds []int
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	if err := broker.Send(int(w.conn.Fd()), o, fds); err != nil {
		syscall.Kill(-w.pid, syscall.SIGKILL)
		b.retired[w.pid] = true
		return false
	}
	b.byPid[w.pid] = o.ID
	b.pgid[o.ID] = w.pid
	return true
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

// WorkerOrder waits, in a warm worker, for its one order and makes the
// process the tool process the order describes: the passed descriptors
// become 0, 1 and 2, the order's environment and directory the process's.
// It returns the tool's argv, or an exit status when the order cannot be
// carried out (126, as an execve that failed; 0 when the init went away
// before giving one).
func WorkerOrder() (argv []string, status int) {
	// Not dumpable while it holds the order socket: no agent process may
	// trace it or take the socket from /proc/PID/fd.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	var o broker.Order
	files, err := broker.Recv(workerFD, &o, 4)
	unix.Close(workerFD)
	if err != nil || len(files) < 3 || len(o.Argv) == 0 {
		for _, f := range files {
			f.Close()
		}
		if err == broker.ErrClosed {
			return nil, 0
		}
		return nil, 126
	}
	// 0-2 the caller's, 3 the call's channel (broker.CallChannelFD) if passed.
	for i, f := range files {
		if err := unix.Dup3(int(f.Fd()), i, 0); err != nil {
			return nil, 126
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
		return nil, 126
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
	return o.Argv, -1
}

// retiredStd are the standard files a worker had before its order.
var retiredStd []*os.File
