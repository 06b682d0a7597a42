package runhost

import (
	"ctx/applets/toolrun"
)

// AgentStartTool starts a child of the calling agent in a sandbox of its
// own (seed "optional agent lifecycle tools"): the run host checks the
// name-specific grant (allow PARENT_t agent:CHILD start), that the child is
// the caller's, and the caller's children budget, then starts the child's
// own run host. Owned and temp children end with the caller's run.
var AgentStartTool = &toolrun.BuiltinTool{
	Name:        "agent.start",
	Description: "Start a child of the calling agent in its own sandbox, with its program (tsh when no command is given) reachable through its terminal socket; it ends with the caller's run. Runs only through the run host of an agent's run.",
	Cap:         "agent.start",
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"agent.start input","type":"object",` +
		`"properties":{"name":{"type":"string","minLength":1},"session":{"type":"string","minLength":1},` +
		`"command":{"type":"array","items":{"type":"string"}}},"required":["name"],"additionalProperties":false}`,
	Run: func(c *toolrun.ToolCall) error { return hostOperation(c, "agent.start") },
}
