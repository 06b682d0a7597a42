package applets

import (
	"path/filepath"
	"strings"

	"ctx/applets/cli"
	"ctx/applets/mcp"
	"ctx/applets/toolrun"
	"ctx/fsops/toolworker"
)

// runToolWorker is the hidden applet of a tool worker
// (fsops/toolworker): it waits for the init's one order, becomes
// that tool process and runs the call the run host decided. The order,
// from the init on a socket only the init holds, is what tells it so; a
// process started any other way (broker.BrokeredEnv set by hand included)
// is a caller, and asks the host or decides for itself.
// A call of an in-process tool (toolrun.StaysForAnother) may leave the
// worker to take the next order instead of exiting (toolworker.Call.Again).
func runToolWorker(_ *cli.Env, _ []string) int {
	for {
		call, status := toolworker.NextOrder(toolrun.StaysForAnother)
		if call == nil {
			return status
		}
		code := executeOrder(processEnv(), call.Argv, &toolrun.HostOrder{HostOps: call.HostOps, Report: call.Report})
		if !call.Again(code) {
			return code
		}
	}
}

// executeOrder runs the call ordered as argv: a tool ctx runs (a builtin,
// an MCP-projected tool, ctx-hooked-tool around a program) by
// toolrun.Execute on the host's order; an applet that is a tool of its
// own (tsh, ctxmcp) or a tool's --help as its row would run.
func executeOrder(e *cli.Env, argv []string, order *toolrun.HostOrder) int {
	if t, args, ok := orderedTool(e, argv); ok {
		return toolrun.Execute(e, t, args, order)
	}
	return runMain(e, argv)
}

// orderedTool is the tool argv names and its arguments, false when argv
// is not a call of one (an applet of its own, or a tool's --help or
// --agentrc-schema, which its row answers).
func orderedTool(e *cli.Env, argv []string) (*toolrun.BuiltinTool, []string, bool) {
	if len(argv) == 0 {
		return nil, nil, false
	}
	e.Argv0 = argv[0]
	name, args := strings.TrimPrefix(filepath.Base(argv[0]), "-"), argv[1:]
	if len(args) == 1 && (isHelpFlag(args[0]) || args[0] == "--agentrc-schema") {
		return nil, nil, false
	}
	if name == toolrun.HookedToolApplet {
		return toolrun.HookedTool(e, args)
	}
	if t, ok := toolrun.BuiltinTools[name]; ok {
		e.Name = t.Name
		return t, args, t.Run != nil
	}
	t, ok := mcp.ProjectedTool(e, name)
	e.Name = name
	return t, args, ok
}
