package applets

import "ctx/fsops"

// decidedByHost is set in a warm tool worker, whose one call came from the
// sandbox's init on the run host's order: the host has decided the call
// against the live tree already, so the tool does not decide it again. A
// process started any other way (CTX_BROKERED set by hand included) still
// checks its own authority.
var decidedByHost bool

// runToolWorker is the hidden applet of a warm tool worker
// (fsops/sandbox_worker.go): it waits for the init's one order, becomes
// that tool process and runs the tool as an execve of its file would.
func runToolWorker(e *Env, args []string) int {
	argv, status := fsops.WorkerOrder()
	if argv == nil {
		return status
	}
	decidedByHost = true
	return Main(argv)
}
