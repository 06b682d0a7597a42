package cli

// Every error and refusal an applet prints goes through cli's printer
// (fail, usageError, warnf and failErr here, DeniedLine for a tool's
// refusal), which escapes terminal control bytes: the message may quote
// arguments, file names and errors as they are.

// UsageError prints a one-line usage error with the help hint and returns 2.
func UsageError(e *Env, format string, args ...any) int {
	Usagef(e.Stderr, e.Name, format, args...)
	return Usage
}

// Fail prints "applet: message" and returns code.
func Fail(e *Env, code int, format string, args ...any) int {
	Errorf(e.Stderr, e.Name, format, args...)
	return code
}

// FailErr prints err as fail does and returns its status by the one errno
// mapping (ErrExit): 13 for EACCES or EPERM, otherwise otherwise.
func FailErr(e *Env, otherwise int, err error) int {
	return Fail(e, ErrExit(err, otherwise), "%v", err)
}

// Warnf prints "applet: warning: message" and goes on.
func Warnf(e *Env, format string, args ...any) {
	Errorf(e.Stderr, e.Name, "warning: "+format, args...)
}
