package proc

import (
	"os"
	"syscall"
)

// signalBase is the shell's convention: a program killed by signal N
// exits 128+N.
const signalBase = 128

// Signaled is the exit status of a program killed by signal sig: 128+N.
func Signaled(sig syscall.Signal) int { return signalBase + int(sig) }

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
