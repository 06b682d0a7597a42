package tsh

import (
	"os"

	"golang.org/x/sys/unix"

	"ctx/applets/authority"
	"ctx/fsops"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// authorize is the authority check run before every execution:
// authorizeExec, or the allowing check a test of this package put in Env.
func authorize(e *Env, root fsops.Root, hit fsops.ToolHit) (errno string, layer string, ok bool) {
	if e.authorize != nil {
		return e.authorize(e, root, hit)
	}
	return authorizeExec(e, root, hit)
}

// authorizeExec runs the full authority check of DESIGN §6 for executing
// hit in the current agent context: Linux mode and owner, mount visibility
// and noexec, the agent's perm ceiling, agent policy, tool policy. It
// returns the errno name and the layer that refused, or ok. It only
// decides: runTool records the refusal (see refused), so that a test's
// allowing check and the real one leave the same audit trail.
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
		return "EACCES", "agent-context", false
	}
	d := c.CheckTrustedHit(hit)
	if d.Allowed {
		return "", "", true
	}
	return unix.ErrnoName(d.Errno), string(d.Layer), false
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
		root = fsops.Root{Dir: sandboxplan.SandboxRoot}
	}
	a, err := authority.LoadAgent(root, ctx.Agent)
	if err != nil {
		return authority.Caller{}, err
	}
	return authority.Caller{Context: ctx, Agent: a, Root: root}, nil
}

// refused records a call tsh ended before the tool ran, as the one
// tool.call event every call leaves (the tool never runs to record it):
// status denied for a refusal (exit 13, or 69 without an agent context),
// error for a tool that could not be started (126). It goes where a tool's
// own event would: to the run host, else to the tool's log.
func (sh *Shell) refused(hit fsops.ToolHit, status, errno, layer string, exit int, detail string) {
	// Inside a run with a broker the run host decides the call itself and
	// records its own refusal: nothing tsh says becomes an event there.
	if sh.env.Tools != nil && sh.env.Tools.HostRecords(sh.env.Getenv, hit.Name) {
		return
	}
	ev := fsops.Event{Object: "tool/" + hit.Name, Status: status, Errno: errno, Layer: layer, Exit: &exit, Detail: detail}
	// A tool without its control directory has no log to append to, the
	// same as when it records its own call.
	dir := hit.ControlDir
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		dir = ""
	}
	if err := authority.RecordToolCall(sh.env.Getenv, dir, ev); err != nil {
		sh.errorf("warning: event not logged: %v", err)
	}
}
