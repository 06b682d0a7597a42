package ctx

import (
	"ctx/applets/cli"
	"ctx/applets/runhost"
	"ctx/fsops"
)

// RunAgentStart is `ctx agent start [--root DIR] NAME [--session S]
// [--shared SPACE] [--cwd PATH] [--mount SRC DST ro|rw]... [--terminal]
// [--no-console] [--raw] [--plan] [--allow-host-root] [-- CMD ARGS]`. It
// stays in the foreground as the run host (runhost.Start) until the run
// ends, and exits with the program's status.
func RunAgentStart(e *cli.Env, args []string) int {
	var o runhost.Options
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.String("session", &o.Session)
	f.String("shared", &o.Shared)
	f.String("cwd", &o.Cwd)
	f.Tuple("mount", 3, &o.Mounts)
	f.Bool("terminal", &o.Terminal)
	f.Bool("no-console", &o.NoConsole)
	f.Bool("raw", &o.Raw)
	f.Bool("plan", &o.Plan)
	f.Bool("allow-host-root", &o.AllowHostRoot)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	o.Root = fsops.SelectRoot(rootFlag, e.Getenv)
	o.Agent, o.Command = pos[0], f.Command
	return runhost.Start(e, o)
}
