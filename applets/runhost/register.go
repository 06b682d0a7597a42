package runhost

import "ctx/applets/toolrun"

// The agent.* tools are builtin tools run by the run host's side.
func init() {
	toolrun.Register(AgentUpdateTool, AgentCreateTool, AgentStartTool, AgentStopTool)
}
