package toolworker

import (
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
)

// A tool worker that stays for another call. A call of an in-process
// tool (NextOrder's stays: fs.read and the like, which start no
// process and leave no goroutine behind) ends with the worker put back as
// it waited before its first order: the call's descriptors closed (the
// caller sees the end of its streams as at an exit), no environment, the
// root as its directory. It then tells the init that the call has ended,
// with the status it would have exited with and what it reports of the
// call, and waits for its next order. The walls are the worker's own,
// set when the init started it, the same for every call it takes; the
// process was never dumpable, so no agent process can have changed it
// between calls. What a process accumulates across calls is bounded: a
// worker whose CPU time or memory grew past StayCPU or StayMemory since
// its first order (RLIMIT_CPU and RLIMIT_DATA count per process) exits
// instead, as does one whose call started a process (a hook) or left a
// goroutine running, and the init starts a fresh one.

// Bounds of what a staying worker may have used since its first order.
const (
	StayCPU    = 50 * time.Millisecond
	StayMemory = 32 << 20 // bytes of peak resident memory
)

// firstUsage is the worker's CPU time and peak memory at its first order
// of an in-process call.
var firstUsage struct {
	noted  bool
	cpu    time.Duration
	maxRSS int64
}

func noteFirstOrder() {
	if !firstUsage.noted {
		firstUsage.cpu, firstUsage.maxRSS = selfUsage()
		firstUsage.noted = true
	}
}

// selfUsage is the process's CPU time (user and system) and peak resident
// memory in bytes.
func selfUsage() (time.Duration, int64) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 1 << 62, 1 << 62 // unknown: never stays
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpu, ru.Maxrss << 10
}

// Again ends the call that exits with status: a worker that may stay for
// another call (see above) is put back as it waited and tells the init so,
// and true is returned (the caller takes the next order); otherwise the
// tool's report goes to the init as before an exit, and false is returned
// (the caller exits with status).
func (c *Call) Again(status int) bool {
	if !c.mayStay || !c.leftNothing() || !resetForOrder() {
		if c.mayStay && c.reported {
			broker.Send(FD, c.report, nil)
		}
		return false
	}
	end := broker.WorkerMessage{Report: c.report, Ended: true, Status: status}
	return broker.Send(FD, end, nil) == nil
}

// leftNothing reports whether the call left the process as it found it,
// within the bounds: no goroutine more than at its order, no process
// started (proc.StartTree made it a subreaper), CPU and memory in bounds.
func (c *Call) leftNothing() bool {
	if runtime.NumGoroutine() > c.goroutines {
		return false
	}
	var subreaper int32
	if unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&subreaper)), 0, 0, 0) != nil || subreaper != 0 {
		return false
	}
	cpu, rss := selfUsage()
	return cpu-firstUsage.cpu < StayCPU && rss-firstUsage.maxRSS < StayMemory
}

// resetForOrder closes the call's descriptors 0-2 (through their files,
// so a pipe leaves the poller), puts /dev/null there, and clears the
// environment, the arguments and the working directory.
func resetForOrder() bool {
	null, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(null)
	for i, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		f.Close()
		if err := unix.Dup3(null, i, 0); err != nil {
			return false
		}
	}
	os.Stdin = os.NewFile(0, os.DevNull)
	os.Stdout = os.NewFile(1, os.DevNull)
	os.Stderr = os.NewFile(2, os.DevNull)
	idleStd = [3]*os.File{os.Stdin, os.Stdout, os.Stderr}
	os.Clearenv()
	os.Args = []string{Applet}
	return os.Chdir("/") == nil
}
