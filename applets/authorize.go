package applets

import (
	"os"

	"ctx/fsops"
)

// This file is the integration point between the tools implemented here
// (MCP-projected tools, ctxmcp serve) and the authority check of DESIGN §6,
// which lives in package policy. Until that check is wired in, both
// functions fail closed inside an agent context: nothing is executed or
// listed for an agent on the strength of this file alone.

// inAgentContext reports whether this process runs for an agent: inside a
// sandbox started by ctx agent start (/mnt/proc/identity exists) or with
// iso=shared (CTX_AGENT set).
func inAgentContext(e *Env) bool {
	if e.Getenv("CTX_AGENT") != "" {
		return true
	}
	_, err := os.Lstat("/mnt/proc/identity")
	return err == nil
}

// authorizeTool decides whether the tool called name may run now. Outside an
// agent context a tool runs with the caller's own Linux authority, like any
// program, and the answer is yes. Inside one, the answer must come from the
// full check (perm ceiling, agent and tool policy); until that is wired it
// refuses with exit 13. A refusal is reported on stderr here.
func authorizeTool(e *Env, name string) (code int, ok bool) {
	if !inAgentContext(e) {
		return exitOK, true
	}
	fail(e, exitDenied, "EACCES: the agent authority check is not wired into this build; refusing to run %s", name)
	return exitDenied, false
}

// toolVisibleTo decides whether ctxmcp serve lists (and so may run) the
// tool hit for agent (empty: no agent). Without an agent every tool found
// through CTX_PATH is listed; for an agent, the full check decides once it
// is wired, and until then nothing is listed.
func toolVisibleTo(e *Env, agent string, hit fsops.ToolHit) bool {
	return agent == "" && !inAgentContext(e)
}
