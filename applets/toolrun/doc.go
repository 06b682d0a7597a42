// Package toolrun is the one tool runner: how a tool call is read, decided,
// run and reported, whether a person runs a tool at a shell, tsh runs it,
// or the sandbox's init starts it on the run host's order. It holds the
// builtin tools' rows (fs.*, shell.exec, the interactive tools, tsh and
// tsh.config), the hooks, frames and schemas every tool shares, and the
// client side of the broker (a call made inside a run is asked of its run
// host).
package toolrun
