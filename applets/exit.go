package applets

import (
	"ctx/applets/cli"
)

// Exit codes shared by every applet: the names applets use for the one
// table in package cli (documented in ctx man ctx and ctx.tool, "EXIT
// STATUS"; part of the tool ABI).
const (
	exitOK          = cli.OK
	exitFailure     = cli.Failure
	exitUsage       = cli.Usage       // bad arguments or bad input format
	exitDenied      = cli.Denied      // refused by policy or file permissions (EACCES, EPERM)
	exitUnavailable = cli.Unavailable // the object exists but cannot run here (EX_UNAVAILABLE)
	exitInternal    = cli.Internal    // internal error (EX_SOFTWARE)
	exitTempFail    = cli.TempFail    // nothing to do now (EX_TEMPFAIL)
	exitNotExec     = cli.NotExec     // found but not executable
	exitNotFound    = cli.NotFound    // unknown applet or tool (POSIX shells use 127 too)
)

// Every error and refusal an applet prints goes through cli's printer
// (fail, usageError, warnf and failErr here, cli.DeniedLine for a tool's
// refusal), which escapes terminal control bytes: the message may quote
// arguments, file names and errors as they are.

// usageError prints a one-line usage error with the help hint and returns 2.
func usageError(e *Env, format string, args ...any) int {
	cli.Usagef(e.Stderr, e.Name, format, args...)
	return exitUsage
}

// fail prints "applet: message" and returns code.
func fail(e *Env, code int, format string, args ...any) int {
	cli.Errorf(e.Stderr, e.Name, format, args...)
	return code
}

// failErr prints err as fail does and returns its status by the one errno
// mapping (cli.ErrExit): 13 for EACCES or EPERM, otherwise otherwise.
func failErr(e *Env, otherwise int, err error) int {
	return fail(e, cli.ErrExit(err, otherwise), "%v", err)
}

// warnf prints "applet: warning: message" and goes on.
func warnf(e *Env, format string, args ...any) {
	cli.Errorf(e.Stderr, e.Name, "warning: "+format, args...)
}
