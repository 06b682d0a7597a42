package tsh

import "os"

// identityFile is where `ctx agent start` publishes the agent identity
// inside a sandbox, on a read-only mount (DESIGN §6).
var identityFile = "/mnt/proc/identity" // a variable only so tests can point it elsewhere

// agentContext reports whether tsh runs inside an agent context: a sandbox
// whose host wrote /mnt/proc/identity, or an iso=shared run where
// `ctx agent start` set CTX_AGENT. It decides two things: which CTX_PATH is
// authoritative (the runtime's, not the user's .tshrc) and whether tsh may
// execute tools at all. It grants nothing by itself: every execution still
// passes authorizeExec.
//
// This is the single place the test lives, so that it can be replaced by
// the policy package's notion of an agent context.
func agentContext(e *Env) bool {
	if e.Getenv("CTX_AGENT") != "" {
		return true
	}
	_, err := os.Lstat(identityFile)
	return err == nil
}
