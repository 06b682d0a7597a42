package applets

import (
	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops/sandbox"
)

// runToolWorker is the hidden applet of a warm tool worker
// (fsops/sandbox/worker.go): it waits for the init's one order, becomes
// that tool process and runs the tool as an execve of its file would, in
// an Env that says the host decided the call: its one call came from the
// sandbox's init on the run host's order, so the tool does not decide it
// again. A process started any other way (CTX_BROKERED set by hand
// included) still checks its own authority.
func runToolWorker(_ *cli.Env, args []string) int {
	argv, status := sandbox.WorkerOrder()
	if argv == nil {
		return status
	}
	toolrun.ClaimCallChannel()
	e := processEnv()
	e.DecidedByHost = true
	return runMain(e, argv)
}
