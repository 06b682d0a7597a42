package applets

import "ctx/fsops"

// runSandboxInit is the hidden applet the sandbox child runs as (see
// fsops.RunSandboxInit). It is reached only through argv[0].
func runSandboxInit(e *Env, args []string) int {
	return fsops.RunSandboxInit(e.Stderr)
}
