package authority

// DeniedPrefix starts the one standard-error line of every exit 13 that
// ctx itself decides in terminal CLI mode: a call refused before the tool
// ran (by tsh, the tool, or the run host, at any layer, hooks included),
// or an operation of a tool that the kernel refused with EACCES or EPERM.
// A program a tool runs (shell.exec's command, bash, tmux, zellij) that
// exits 13 on its own gets no such line from ctx, so a caller reading only
// the exit status and standard error can tell the two apart (ctx man
// ctx.tool, EXIT STATUS). In native mode the frames say it instead.
const DeniedPrefix = "ctx: denied: "

// DeniedLine is that line for a program called name: the prefix, then the
// line it would print for any other failure ("NAME: MESSAGE"). msg must
// already be escaped for a terminal.
func DeniedLine(name, msg string) string {
	return DeniedPrefix + name + ": " + msg + "\n"
}
