package tsh

import (
	"os"

	"golang.org/x/sys/unix"

	"ctx/applets/authority"
	"ctx/fsops"
	"ctx/policy"
)

// authorize is the authority check run before every execution. It is a
// variable only so that this package's tests can install an allowing check
// to exercise the exec mechanics; the production binary never assigns it.
var authorize = authorizeExec

// authorizeExec runs the full authority check of DESIGN §6 for executing
// hit in the current agent context: Linux mode and owner, mount visibility
// and noexec, the agent's perm ceiling, agent policy, tool policy. It
// returns the errno name and the layer that refused, or ok. A refusal is
// reported to the run host as a denied tool.call, since the tool itself
// never runs to report it.
//
// Inside a sandbox the agent's authority is read from /ctx, the read-only
// tree, whatever --root or CTX_ROOT say; elsewhere from tsh's own root.
//
// The tool-trust rule (DESIGN §16 rule 8) comes first: a hit whose tier,
// file or control directory is not trusted now (ToolPath left out the tiers
// that were not when tsh started) is refused with layer tool-trust.
func authorizeExec(e *Env, root fsops.Root, hit fsops.ToolHit) (errno string, layer string, ok bool) {
	c, err := caller(e, root)
	if err != nil {
		return deny(e, hit, "EACCES", "agent-context")
	}
	d := c.CheckTrustedHit(hit)
	if d.Allowed {
		return "", "", true
	}
	return deny(e, hit, unix.ErrnoName(d.Errno), string(d.Layer))
}

// caller establishes the agent context tsh runs in. Inside a sandbox the
// agent's authority is read from /ctx, the read-only tree, whatever --root
// or CTX_ROOT say; elsewhere from tsh's own root.
func caller(e *Env, root fsops.Root) (authority.Caller, error) {
	ctx, err := detectContext(e)
	if err != nil {
		return authority.Caller{}, err
	}
	if ctx.Source == policy.ContextSandbox {
		root = fsops.Root{Dir: policy.SandboxRoot}
	}
	a, err := authority.LoadAgent(root, ctx.Agent)
	if err != nil {
		return authority.Caller{}, err
	}
	return authority.Caller{Context: ctx, Agent: a, Root: root}, nil
}

func deny(e *Env, hit fsops.ToolHit, errno, layer string) (string, string, bool) {
	exit := 13
	uid := os.Getuid()
	authority.Report(e.Getenv, fsops.Event{Type: "tool.call", Object: "tool/" + hit.Name, Status: "denied",
		Errno: errno, Layer: layer, Exit: &exit, UID: &uid, Detail: "refused by tsh before execution"})
	return errno, layer, false
}
