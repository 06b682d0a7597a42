package tsh

import (
	"errors"
	"io/fs"

	"ctx/fsops"
	"ctx/policy"
)

// identityFile is where `ctx agent start` publishes the agent identity
// inside a sandbox, on a read-only mount (DESIGN §6).
var identityFile = policy.IdentityPath // a variable only so tests can point it elsewhere

// detectContext finds the agent context of this tsh: the sandbox identity
// file when present, else the CTX_AGENT, CTX_SESSION and CTX_RUN_ID of an
// iso=shared run, else none.
func detectContext(e *Env) (policy.AgentContext, error) {
	identity, err := fsops.ReadControl(identityFile)
	if errors.Is(err, fs.ErrNotExist) {
		identity, err = nil, nil
	}
	if err != nil {
		return policy.AgentContext{}, err
	}
	return policy.DetectContext(identity, e.Getenv)
}

// agentContext reports whether tsh runs inside an agent context. It decides
// two things: which CTX_PATH is authoritative (the runtime's, not the
// user's .tshrc) and whether tsh may execute tools at all. It grants
// nothing by itself: every execution still passes authorizeExec. A context
// that is there but cannot be read counts as one (and then refuses every
// execution): tsh never falls back to a person's view.
func agentContext(e *Env) bool {
	ctx, err := detectContext(e)
	return err != nil || ctx.Source != policy.ContextNone
}
