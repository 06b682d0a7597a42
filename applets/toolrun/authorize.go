package toolrun

import (
	"syscall"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
)

// authorizeTool decides whether the current process may run tool name.
// Outside an agent context (a person at a shell) it allows: the tool runs
// with the caller's own Linux permissions and nothing more. Inside one it
// runs the full authority check, so executing /ctx/tool/NAME or
// /mnt/tools/NAME directly is governed exactly like a call through tsh. A
// context that exists but cannot be established (an unreadable identity, a
// broken agent definition) refuses.
func authorizeTool(e *cli.Env, name string) *ToolError {
	c, err := authority.CurrentCaller(e.Getenv)
	if err != nil {
		return &ToolError{Errno: syscall.EACCES, Exit: cli.Denied, Layer: "agent-context",
			Msg: "permission denied (agent-context): " + err.Error()}
	}
	if !c.InAgent() {
		return nil
	}
	// The tool is found through the agent's tool path over the tiers and
	// tools the trust rule keeps (DESIGN §16 rule 8).
	d := c.CheckTool(name)
	if d.Allowed {
		return nil
	}
	exit := cli.Denied
	if d.Errno == syscall.EINVAL {
		exit = cli.Usage
	}
	return &ToolError{Errno: d.Errno, Exit: exit, Layer: string(d.Layer),
		Msg: "permission denied (" + string(d.Layer) + "): " + d.Reason}
}

// ToolVisibility decides which tools ctxmcp serve lists (and so may run),
// on the tree as it is now. Inside an agent context the server serves that
// agent's own tools and no other agent's; on the host, --agent A serves
// what A may execute; with neither, a person serves every tool CTX_PATH
// shows. For an agent, a tool the trust rule sets aside (its tier, file or
// control directory is not trusted, DESIGN §16 rule 8) is never served.
// What every tool's decision shares (the caller, the agent, its trust and
// view) is read once, here; the function returned decides one tool.
func ToolVisibility(e *cli.Env, root fsops.Root, agent string) func(hit fsops.ToolHit) bool {
	none := func(fsops.ToolHit) bool { return false }
	c, err := authority.CurrentCaller(e.Getenv)
	if err != nil {
		return none
	}
	if c.InAgent() {
		if agent != "" && agent != c.Agent.Name {
			return none
		}
		trust, view := c.Trust(), c.View()
		return func(hit fsops.ToolHit) bool {
			if ok, _ := trust.Tool(hit); !ok {
				return false
			}
			return authority.CheckHit(c.Agent, view, hit).Allowed
		}
	}
	if agent == "" {
		return func(fsops.ToolHit) bool { return true }
	}
	a, err := authority.LoadAgent(root, agent)
	if err != nil {
		return none
	}
	trust, view := authority.LoadTrust(root), authority.View(root, a)
	return func(hit fsops.ToolHit) bool {
		if ok, _ := trust.Tool(hit); !ok {
			return false
		}
		return authority.CheckHit(a, view, hit).Allowed
	}
}
