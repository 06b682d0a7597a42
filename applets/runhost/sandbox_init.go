package runhost

import (
	"ctx/applets/cli"
	"ctx/fsops/sandbox"
)

// RunSandboxInit is the hidden applet the sandbox child runs as (see
// sandbox.RunInit). It is reached only through argv[0].
func RunSandboxInit(e *cli.Env, args []string) int {
	return sandbox.RunInit(e.Stderr)
}

// RunUsernsHold is the hidden applet that holds a user namespace open
// while the run host takes a descriptor of it (sandbox.IDMappedTree).
func RunUsernsHold(e *cli.Env, args []string) int {
	return sandbox.RunUsernsHold()
}

// RunConfine is the hidden applet an iso shared run starts its program
// through (sandbox.RunConfine): no_new_privs and the seccomp filter, then
// the program.
func RunConfine(e *cli.Env, args []string) int {
	return sandbox.RunConfine(args, e.Stderr)
}
