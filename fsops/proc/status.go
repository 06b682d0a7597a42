package proc

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// The exit statuses of the tool ABI (ctx man ctx.tool, EXIT STATUS): the
// one home of the numbers, here so that fsops and its sandbox, which sit
// below applets, write them by name too. Package applets/cli gives them
// the names the applets use.
const (
	ExitOK          = 0
	ExitFailure     = 1   // failure; the errno is in the message, frame and event
	ExitUsage       = 2   // bad arguments or bad input (EINVAL)
	ExitDenied      = 13  // denied (EACCES): by policy, or the kernel refused with EACCES/EPERM
	ExitUnavailable = 69  // the object exists but cannot run here (EX_UNAVAILABLE)
	ExitInternal    = 70  // internal error (EX_SOFTWARE)
	ExitTempFail    = 75  // nothing to do now, try again later (EX_TEMPFAIL)
	ExitNotExec     = 126 // found but could not be executed
	ExitNotFound    = 127 // not found (POSIX shells use 127 too)
)

// signalBase is the shell's convention: a program killed by signal N
// exits 128+N.
const signalBase = 128

// Signaled is the exit status of a program killed by signal sig: 128+N.
func Signaled(sig syscall.Signal) int { return signalBase + int(sig) }

// StartFailure is the one mapping from a program that could not be
// started to its exit status, as POSIX shells make it: ExitNotFound when
// the program is not there (not found in a PATH, or ENOENT from the
// execve, which is also what a missing #! interpreter gives), ExitNotExec
// for every other reason (EACCES, ENOEXEC, EISDIR, E2BIG...). The errno
// decides nothing else: it is named in the message.
func StartFailure(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return ExitNotFound
	}
	return ExitNotExec
}

// StatusCode maps a wait status to a shell-style exit code: the exit
// code, or 128+N for a death by signal N; -1 for a status that is
// neither (stopped, continued).
func StatusCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return Signaled(ws.Signal())
	}
	return -1
}

// ExitCode is StatusCode of a finished process; -1 when there is none
// (the process never started, or was not waited for).
func ExitCode(state *os.ProcessState) int {
	if state == nil {
		return -1
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok {
		return StatusCode(ws)
	}
	return state.ExitCode()
}
