package tsh

import "ctx/fsops"

// authorize is the authority check run before every execution. It is a
// variable only so that this package's tests can install an allowing check
// to exercise the exec mechanics; the production binary never assigns it.
var authorize = authorizeExec

// authorizeExec is the integration point for the full authority check of
// DESIGN §6 (Linux mode and owner, mount visibility and noexec, the agent's
// perm ceiling, agent policy, tool policy, pre hooks) for running hit in
// the current agent context. It returns the errno name and the layer that
// refused, or ok.
//
// Until policy.CheckTool is wired in here it refuses every tool, so that
// nothing ever runs on an unchecked path: a refusal is safe, a guessed
// allow is not.
func authorizeExec(e *Env, hit fsops.ToolHit) (errno string, layer string, ok bool) {
	return "EACCES", "authority-check", false
}
