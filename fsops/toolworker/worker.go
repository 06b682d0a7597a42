// Package toolworker is a tool worker's own side (the init's is in
// package sandbox, worker.go): a ctx process the sandbox's init started
// with the run's walls, waiting on a socket only the init holds for the
// order of a call the run host decided. Given the order it becomes the
// tool process exactly as an execve of the tool's file would have made it
// (the caller's descriptors as 0-2, the call's arguments, environment and
// directory) and runs the call; before it exits it sends on the same
// socket what only it knows of the call (its errno, layer and detail),
// and the init adds that to the exit it reports. The order is the
// process's only reason to believe the run host decided the call: nothing
// in its environment says so. After a call of an in-process tool it may
// wait for another instead of exiting (again.go).
package toolworker

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
	"ctx/fsops/proc"
)

// Applet is the hidden applet a tool worker runs as.
const Applet = "ctx-tool-worker"

// FD is the worker's end of its socket to the init.
const FD = 3

// Call is the call a tool worker was ordered to run, once
// Order has made the process its tool process.
type Call struct {
	Argv []string
	// HostOps is the call's host-operation channel, when the host passed
	// one (the agent.* tools ask their host operation on it), else nil.
	HostOps  *os.File
	reported bool
	// mayStay: the worker may take another call after this one
	// (again.go); report is then held until the call has ended.
	mayStay    bool
	report     broker.Report
	goroutines int
}

// Report tells the init what only the tool knows of its call, once,
// before the process exits: the init reports it with the exit. A call
// after which the worker may stay sends it with its end instead (Again).
func (c *Call) Report(rep broker.Report) {
	if c.reported {
		return
	}
	c.reported = true
	if c.mayStay {
		c.report = rep
		return
	}
	broker.Send(FD, rep, nil)
}

// Order waits, in a tool worker, for its one order and makes the
// process the tool process the order describes: the passed descriptors
// become 0, 1 and 2, the order's environment and directory the process's.
// It returns the call, or an exit status when the order cannot be carried
// out (126, as an execve that failed; 0 when the init went away before
// giving one).
func Order() (call *Call, status int) {
	return NextOrder(nil)
}

// NextOrder is Order for a worker that may take more than one
// call: stays reports the calls (by argv) of an in-process tool, after
// which the worker may take another (Call.Again). Such a call runs
// as the worker waited, not dumpable (no agent process may trace it or
// read its memory, so nothing of one call can be planted for the next);
// every other call's process is dumpable from its order on, as after an
// execve, and exits with its tool.
func NextOrder(stays func(argv []string) bool) (call *Call, status int) {
	// Not dumpable while it waits: no agent process may trace it. Its
	// socket is kept, for the report, but never inherited.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	unix.CloseOnExec(FD)
	var o broker.Order
	files, err := broker.Recv(FD, &o, 4)
	if err != nil || len(files) < 3 || len(o.Argv) == 0 {
		for _, f := range files {
			f.Close()
		}
		if err == broker.ErrClosed {
			return nil, 0
		}
		return nil, proc.ExitNotExec
	}
	call = &Call{Argv: o.Argv}
	if len(files) > 3 {
		call.HostOps = files[3]
	}
	// 0-2 the caller's.
	if err := adoptStandard(files[:3]); err != nil {
		return nil, proc.ExitNotExec
	}
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
	if stays != nil && call.HostOps == nil && stays(o.Argv) {
		call.mayStay = true
		call.goroutines = runtime.NumGoroutine()
		noteFirstOrder()
		return call, -1
	}
	// From here on it is the tool process, dumpable as after an execve.
	unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	return call, -1
}

// adoptStandard makes files the process's descriptors 0, 1 and 2. The
// standard files are opened afresh on them (a nonblocking pipe gets the
// poller, as at a process's start); the worker's own, from its start, are
// kept so their finalizers never close the new 0-2, and the ones a
// staying worker put there between calls are closed first (Again).
func adoptStandard(files []*os.File) error {
	for i, f := range files {
		if idleStd[i] != nil {
			idleStd[i].Close()
			idleStd[i] = nil
		}
		if err := unix.Dup3(int(f.Fd()), i, 0); err != nil {
			return err
		}
		f.Close()
	}
	if retiredStd == nil {
		retiredStd = []*os.File{os.Stdin, os.Stdout, os.Stderr}
	}
	os.Stdin = os.NewFile(0, "/dev/stdin")
	os.Stdout = os.NewFile(1, "/dev/stdout")
	os.Stderr = os.NewFile(2, "/dev/stderr")
	return nil
}

// retiredStd are the standard files a worker had before its first order;
// idleStd those a staying worker holds between calls (/dev/null).
var (
	retiredStd []*os.File
	idleStd    [3]*os.File
)
