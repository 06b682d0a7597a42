package applets

import "ctx/fsops"

// runSandboxInit is the hidden applet the sandbox child runs as (see
// fsops.RunSandboxInit). It is reached only through argv[0].
func runSandboxInit(e *Env, args []string) int {
	return fsops.RunSandboxInit(e.Stderr)
}

// runUsernsHold is the hidden applet that holds a user namespace open
// while the run host takes a descriptor of it (fsops.IDMappedTree).
func runUsernsHold(e *Env, args []string) int {
	return fsops.RunUsernsHold()
}
