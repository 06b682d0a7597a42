package fsops

import "strings"

// Option is " --root DIR" for a ctx command that a hint or an error names,
// empty for the default root: the command then works as printed, pasted
// into another shell that has no $CTX_ROOT. DIR is shell-quoted when it
// needs to be.
func (r Root) Option() string {
	if r.Dir == DefaultRoot {
		return ""
	}
	return " --root " + ShellQuote(r.Dir)
}

// ShellQuote quotes s for a POSIX shell when it holds anything but the
// bytes of an ordinary path.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
