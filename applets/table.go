package applets

import (
	"sort"

	"ctx/fsops"
)

// builtinTools are the tools implemented inside ctx, by name.
var builtinTools = map[string]*builtinTool{}

// toolApplet makes the applet row of a builtin tool.
func toolApplet(t *builtinTool) Applet {
	builtinTools[t.Name] = t
	return Applet{Name: t.Name, Tool: true, Run: func(e *Env, args []string) int { return runBuiltinTool(e, t, args) }}
}

// ownRunner makes the row of a tool implemented by its own applet (tsh,
// tsh.config) that still needs the metadata bootstrap writes.
func ownRunner(t *builtinTool, run func(*Env, []string) int) Applet {
	builtinTools[t.Name] = t
	return Applet{Name: t.Name, Tool: true, Run: run}
}

// The table is filled in init, not in a composite literal, because the ctx
// applet lists the table and a literal would be an initialization cycle
// (cmd/go fills its command list in init for the same reason).
func init() {
	table = []Applet{
		{Name: "ctx", Run: runCtx},
		{Name: fsops.SandboxInitApplet, Run: runSandboxInit, Hidden: true},
		{Name: fsops.UsernsHoldApplet, Run: runUsernsHold, Hidden: true},
		{Name: fsops.ConfineApplet, Run: runConfine, Hidden: true},
		{Name: fsops.ToolWorkerApplet, Run: runToolWorker, Hidden: true},
		{Name: mcpKeeperApplet, Run: runMCPKeeper, Hidden: true},
		{Name: hookedToolApplet, Run: runHookedTool, Hidden: true},
		toolApplet(fsReadTool),
		toolApplet(fsListTool),
		toolApplet(fsStatTool),
		toolApplet(fsWriteTool),
		toolApplet(fsReplaceTool),
		toolApplet(shellExecTool),
		toolApplet(agentUpdateTool),
		toolApplet(agentCreateTool),
		toolApplet(agentStartTool),
		toolApplet(agentStopTool),
		toolApplet(bashTool),
		toolApplet(tmuxTool),
		toolApplet(zellijTool),
		ownRunner(tshTool, runTsh),
		ownRunner(tshConfigTool, runTshConfig),
		{Name: "ctxmcp", Run: runCtxmcp},
		{Name: "ctxterm", Run: runCtxterm},
	}
	sort.Slice(table, func(i, j int) bool { return table[i].Name < table[j].Name })

	ctxCommands = []subcommand{
		{"agent", runAgent},
		{"bootstrap", runBootstrap},
		{"cat", runCat},
		{"doctor", runDoctor},
		{"ls", runLs},
		{"set", runSet},
		{"which", runWhich},
		{"man", runMan},
		{"policy", runPolicy},
		{"tool", runCtxTool},
		{"object", runObject},
		{"queue", runQueue},
		{"run", runRun},
		{"shared", runShared},
		{"validate-name", runValidateName},
	}
	sort.Slice(ctxCommands, func(i, j int) bool { return ctxCommands[i].Name < ctxCommands[j].Name })
}
