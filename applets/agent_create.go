package applets

// agentCreateTool creates a child of the calling agent (seed "optional
// agent lifecycle tools"): the run host checks the name-specific grant
// (allow PARENT_t agent:CHILD create) and that the child is an attenuation
// of the caller (ctx man policy), and writes the child whole or not at all.
var agentCreateTool = &builtinTool{
	Name:        "agent.create",
	Description: "Create a child of the calling agent: name, and optionally label, model, perm, tools, shared grants, mounts and life; never more than the caller holds. Runs only through the run host of an agent's run.",
	Cap:         "agent.create",
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"agent.create input","type":"object",` +
		`"properties":{"name":{"type":"string","minLength":1},"label":{"type":"string"},"model":{"type":"string"},` +
		`"perm":{"type":"string"},"life":{"enum":["owned","temp"]},` +
		`"tools":{"type":"array","items":{"type":"string"}},"shared":{"type":"array","items":{"type":"string"}},` +
		`"mount":{"type":"array","items":{"type":"object","properties":{"source":{"type":"string"},"target":{"type":"string"},` +
		`"mode":{"enum":["ro","rw"]}},"required":["source","target","mode"],"additionalProperties":false}}},` +
		`"required":["name"],"additionalProperties":false}`,
	Run: func(c *toolCall) error { return hostOperation(c, "agent.create") },
}
