package runhost

import (
	"encoding/json"
	"fmt"
	"syscall"

	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops/broker"
)

// AgentUpdateTool is the self-iteration endpoint (seed "Agent Self
// Iteration"): a running agent replaces system.md or prompt.template.md of
// its own control directory. The run host does the write (the tree is
// read-only inside the sandbox): it binds the request to the calling agent,
// so no request can name another, and checks the control and the content
// again itself.
var AgentUpdateTool = &toolrun.BuiltinTool{
	Name:        "agent.update",
	Description: "Replace the calling agent's own system.md or prompt.template.md (at most 8 KiB of UTF-8, no NUL); the next run renders it. Runs only through the run host of an agent's run.",
	Cap:         "agent.update",
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"agent.update input",` +
		`"type":"object","properties":{"control":{"type":"string","minLength":1},"content":{"type":"string"},` +
		`"request_id":{"type":"string","minLength":1,"maxLength":128}},"required":["control","content"],"additionalProperties":false}`,
	Run: func(c *toolrun.ToolCall) error { return hostOperation(c, "agent.update") },
}

// hostOperation hands a validated call to the run host that brokered it and
// prints the host's answer. Outside a call the host ordered there is no
// host to do it: the call is refused (69).
func hostOperation(c *toolrun.ToolCall, op string) error {
	input, err := json.Marshal(c.Input)
	if err != nil {
		return toolrun.ToolErr(syscall.EINVAL, cli.Usage, "%v", err)
	}
	reply, ok, err := c.AskHost(broker.HostOp{Op: op, Input: input})
	switch {
	case !ok:
		return toolrun.ToolErr(syscall.EAGAIN, cli.Unavailable, "%s runs only through the run host of an agent's run (ctx agent start)", op)
	case err != nil:
		return toolrun.ToolErr(syscall.EIO, cli.Unavailable, "the run host did not answer: %v", err)
	}
	if reply.Exit != 0 {
		errno := syscall.EIO
		if e := toolrun.ErrnoByName(reply.Errno); e != 0 {
			errno = e
		}
		te := &toolrun.ToolError{Errno: errno, Exit: reply.Exit, Msg: reply.Error}
		if reply.Exit == cli.Denied {
			te.Layer = "agent-policy"
		}
		return te
	}
	fmt.Fprintln(c.Out, reply.Output)
	return nil
}
