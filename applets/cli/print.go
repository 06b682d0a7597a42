package cli

import (
	"fmt"
	"io"
)

// DeniedPrefix starts the one standard-error line of every exit 13 that
// ctx itself decides for a tool in terminal CLI mode: a call refused
// before the tool ran (by tsh, the tool, or the run host, at any layer,
// hooks included), or an operation of a tool that the kernel refused with
// EACCES or EPERM. A program a tool runs (shell.exec's command, bash,
// tmux, zellij) that exits 13 on its own gets no such line from ctx, so a
// caller reading only the exit status and standard error can tell the two
// apart (ctx man ctx.tool, EXIT STATUS). In native mode the frames say it
// instead.
const DeniedPrefix = "ctx: denied: "

// Line is the one line a program called name prints for a failure:
// "NAME: MESSAGE" and a newline. Everything in it is escaped for a
// terminal (Escape: control bytes, escape sequences, newlines and
// invalid UTF-8 are shown as Go escapes), so no text of a caller, a file
// name or a server reaches the terminal as control bytes, and a message
// cannot forge a second line. Escaping is idempotent: text escaped before
// is printed as it is.
func Line(name, msg string) string {
	return Escape(name) + ": " + Escape(msg) + "\n"
}

// DeniedLine is the line of a refusal: Line marked with DeniedPrefix.
func DeniedLine(name, msg string) string {
	return DeniedPrefix + Line(name, msg)
}

// UsageLine is Line for bad arguments, with the help hint.
func UsageLine(name, msg string) string {
	return Line(name, msg+fmt.Sprintf(" (see %q)", name+" --help"))
}

// Errorf prints Line(name, the formatted message) on w.
func Errorf(w io.Writer, name, format string, args ...any) {
	io.WriteString(w, Line(name, fmt.Sprintf(format, args...)))
}

// Deniedf prints DeniedLine(name, the formatted message) on w.
func Deniedf(w io.Writer, name, format string, args ...any) {
	io.WriteString(w, DeniedLine(name, fmt.Sprintf(format, args...)))
}

// Usagef prints UsageLine(name, the formatted message) on w.
func Usagef(w io.Writer, name, format string, args ...any) {
	io.WriteString(w, UsageLine(name, fmt.Sprintf(format, args...)))
}
