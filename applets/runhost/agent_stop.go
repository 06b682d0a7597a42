package runhost

import (
	"ctx/applets/toolrun"
)

// AgentStopTool stops a child of the calling agent that this run started
// (grant allow PARENT_t agent:CHILD stop), with the child's own owned and
// temp descendants first, as ctx agent stop does.
var AgentStopTool = &toolrun.BuiltinTool{
	Name:        "agent.stop",
	Description: "Stop a child of the calling agent that this run started (and the child's owned and temp descendants). Runs only through the run host of an agent's run.",
	Cap:         "agent.stop",
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"agent.stop input","type":"object",` +
		`"properties":{"name":{"type":"string","minLength":1}},"required":["name"],"additionalProperties":false}`,
	Run: func(c *toolrun.ToolCall) error { return hostOperation(c, "agent.stop") },
}
