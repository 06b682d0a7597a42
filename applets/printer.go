package applets

import (
	"ctx/applets/cli"
)

// Every error and refusal an applet prints goes through cli's printer
// (fail, usageError, warnf and failErr here, cli.DeniedLine for a tool's
// refusal), which escapes terminal control bytes: the message may quote
// arguments, file names and errors as they are.

// usageError prints a one-line usage error with the help hint and returns 2.
func usageError(e *Env, format string, args ...any) int {
	cli.Usagef(e.Stderr, e.Name, format, args...)
	return cli.Usage
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
