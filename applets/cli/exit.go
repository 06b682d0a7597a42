// Package cli is the leaf that every applet and tsh share for how a
// program of ctx ends: the exit statuses (one table, `ctx man ctx` and
// `ctx man ctx.tool`, EXIT STATUS), the one errno-to-exit mapping, and the
// one printer of error and refusal lines, and Escape, the one function that
// makes untrusted text safe to show a person. It imports nothing of ctx but
// fsops/proc, so tsh, authority and every applet can use it without
// reaching back into applets.
package cli

import (
	"errors"
	"io/fs"
	"syscall"

	"ctx/fsops/proc"
)

// Exit statuses shared by every applet and tsh. They are part of the tool
// ABI (ctx man ctx.tool, EXIT STATUS); the numbers live in fsops/proc,
// where fsops and its sandbox use them too.
const (
	OK          = proc.ExitOK
	Failure     = proc.ExitFailure     // failure; the errno is in the message, frame and event
	Usage       = proc.ExitUsage       // bad arguments or bad input (EINVAL)
	Denied      = proc.ExitDenied      // denied (EACCES): by policy, or the kernel refused with EACCES/EPERM
	Unavailable = proc.ExitUnavailable // the object exists but cannot run here (EX_UNAVAILABLE)
	Internal    = proc.ExitInternal    // internal error (EX_SOFTWARE)
	TempFail    = proc.ExitTempFail    // nothing to do now, try again later (EX_TEMPFAIL): ctx queue claim/exec
	NotExec     = proc.ExitNotExec     // found but not executable
	NotFound    = proc.ExitNotFound    // unknown applet, command, agent or tool (POSIX shells use 127 too)
)

// Signaled is the status of a program killed by signal sig: 128+N (the
// one mapping, fsops/proc, which the process runner uses too).
func Signaled(sig syscall.Signal) int { return proc.Signaled(sig) }

// ErrnoExit is the one mapping from an errno to an exit status. It is
// deliberately small: the errno decides only a denial. EACCES and EPERM
// are Denied (13) wherever they come from, policy or file permissions;
// 0 is OK; any other errno is otherwise, the status the caller gives a
// failure of its kind (Failure for an operation, Usage for bad input,
// Unavailable for an object that cannot be used). The errno itself is not
// lost: it is in the message, the error frame and the event.
//
// Starting a program is not an errno question: a program that is not
// found is NotFound, one that cannot be executed NotExec, whatever the
// errno (as POSIX shells do): proc.StartFailure, the one mapping.
func ErrnoExit(errno syscall.Errno, otherwise int) int {
	switch errno {
	case 0:
		return OK
	case syscall.EACCES, syscall.EPERM:
		return Denied
	}
	return otherwise
}

// ErrExit is ErrnoExit for an error: OK for nil, else by the errno the
// error carries anywhere in its chain (fs.ErrPermission counts as EACCES),
// otherwise when it carries none.
func ErrExit(err error, otherwise int) int {
	if err == nil {
		return OK
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return ErrnoExit(errno, otherwise)
	}
	if errors.Is(err, fs.ErrPermission) {
		return ErrnoExit(syscall.EACCES, otherwise)
	}
	return otherwise
}
