package applets

import (
	"io"
	"slices"
	"strings"

	"ctx/applets/cli"
	"ctx/applets/ctx"
	"ctx/applets/lifecycle"
	"ctx/applets/mcp"
	"ctx/applets/runhost"
	"ctx/applets/toolrun"
	"ctx/fsops/sandbox"
	"ctx/manual"
)

// The dispatch table: every applet, every `ctx CMD` and every verb of
// either is one row (Applet) of one tree, table. `ctx` is a row whose verbs
// are the ctx commands (ctxCommands); `ctx agent` a row whose verbs are
// agent's. Dispatch (Main, runCtx), --help and VERB --help (runRow), --list
// and --install (Names), `ctx man` and the manual tests all read it; a
// command's verbs are run by one function, runVerbs.

// toolApplet makes the applet row of a builtin tool (the tool's own
// package registered it in toolrun.BuiltinTools).
func toolApplet(t *toolrun.BuiltinTool) cli.Applet {
	return cli.Applet{Name: t.Name, Tool: true, Run: func(e *cli.Env, args []string) int { return toolrun.RunTool(e, t, args) }}
}

// ownRunner makes the row of a tool implemented by its own applet (tsh,
// tsh.config) that still needs the metadata bootstrap writes.
func ownRunner(t *toolrun.BuiltinTool, run func(*cli.Env, []string) int) cli.Applet {
	return cli.Applet{Name: t.Name, Tool: true, Run: run}
}

// ctxCommands are the verbs of the ctx row: `ctx CMD`, one file each
// (ctx_CMD.go), documented by manual/ctx-CMD.md.
var ctxCommands []cli.Applet

// The table is filled in init, not in a composite literal, because the ctx
// applet lists the table and a literal would be an initialization cycle
// (cmd/go fills its command list in init for the same reason).
func init() {
	ctxCommands = ctxCommandRows()
	for i := range ctxCommands {
		ctxCommands[i].Page = "ctx-" + ctxCommands[i].Name
	}
	slices.SortFunc(ctxCommands, byName) // not sort.Slice: no reflection at every start

	table = []cli.Applet{
		{Name: "ctx", Run: runCtx, Verbs: ctxCommands},
		{Name: sandbox.InitApplet, Run: runhost.RunSandboxInit, Hidden: true},
		{Name: sandbox.UsernsHoldApplet, Run: runhost.RunUsernsHold, Hidden: true},
		{Name: sandbox.ConfineApplet, Run: runhost.RunConfine, Hidden: true},
		{Name: sandbox.ToolWorkerApplet, Run: runToolWorker, Hidden: true},
		{Name: sandbox.UnixConnectorApplet, Run: func(*cli.Env, []string) int { return sandbox.RunUnixConnector() }, Hidden: true},
		{Name: mcp.McpKeeperApplet, Run: mcp.RunMCPKeeper, Hidden: true},
		{Name: toolrun.HookedToolApplet, Run: toolrun.RunHookedTool, Hidden: true},
		toolApplet(toolrun.FsReadTool),
		toolApplet(toolrun.FsListTool),
		toolApplet(toolrun.FsStatTool),
		toolApplet(toolrun.FsWriteTool),
		toolApplet(toolrun.FsReplaceTool),
		toolApplet(toolrun.ShellExecTool),
		toolApplet(runhost.AgentUpdateTool),
		toolApplet(runhost.AgentCreateTool),
		toolApplet(runhost.AgentStartTool),
		toolApplet(runhost.AgentStopTool),
		toolApplet(toolrun.BashTool),
		toolApplet(toolrun.TmuxTool),
		toolApplet(toolrun.ZellijTool),
		ownRunner(toolrun.TshTool, toolrun.RunTsh),
		ownRunner(toolrun.TshConfigTool, toolrun.RunTshConfig),
		{Name: "ctxmcp", Verbs: []cli.Applet{
			{Name: "list", Run: mcp.CtxmcpList},
			{Name: "project", Run: mcp.CtxmcpProject},
			{Name: "serve", Run: mcp.CtxmcpServe},
		},
			Missing: "missing verb: list, project or serve",
			Unknown: "unknown verb %q (want list, project or serve)"},
		{Name: "ctxterm", Run: ctx.RunCtxterm},
	}
	for i := range table {
		table[i].Page = table[i].Name
	}
	slices.SortFunc(table, byName)
}

func byName(a, b cli.Applet) int { return strings.Compare(a.Name, b.Name) }

// ctxCommandRows are the rows of `ctx CMD`, before their pages are set
// and they are sorted.
func ctxCommandRows() []cli.Applet {
	return []cli.Applet{
		{Name: "agent", NameVerb: true, Verbs: []cli.Applet{
			{Name: "attach", Run: ctx.RunAgentAttach},
			{Name: "children", Run: ctx.RunAgentChildren},
			{Name: "env", Run: ctx.RunAgentEnv},
			{Name: "new", Run: ctx.RunAgentNew},
			{Name: "ps", Run: ctx.RunAgentPs},
			{Name: "start", Run: ctx.RunAgentStart},
			{Name: "status", Run: ctx.RunAgentStatus},
			{Name: "stop", Run: lifecycle.RunAgentStop},
			{Name: "watch", Run: ctx.RunAgentWatch},
		}},
		{Name: "bootstrap", Run: ctx.RunBootstrap},
		{Name: "cat", Run: ctx.RunCat},
		{Name: "doctor", Run: ctx.RunDoctor},
		{Name: "ls", Run: ctx.RunLs},
		{Name: "set", Run: ctx.RunSet},
		{Name: "which", Run: ctx.RunWhich},
		{Name: "man", Run: ctx.RunMan},
		{Name: "policy", NameVerb: true, Verbs: []cli.Applet{
			{Name: "allow", Run: ctx.RunPolicyAllow},
			{Name: "check", Run: ctx.RunPolicyCheck},
			{Name: "explain", Run: ctx.RunPolicyExplain},
			{Name: "revoke", Run: ctx.RunPolicyRevoke},
		}},
		{Name: "tool", Run: ctx.RunCtxTool},
		{Name: "object", Verbs: []cli.Applet{
			{Name: "check", Run: ctx.ObjectVerb("check")},
			{Name: "install", Run: ctx.ObjectVerb("install")},
			{Name: "inspect", Run: ctx.ObjectVerb("inspect")},
			{Name: "uninstall", Run: ctx.ObjectVerb("uninstall")},
		},
			Missing: "missing verb: check, install, inspect or uninstall",
			Unknown: "unknown verb %q (want check, install, inspect or uninstall)"},
		{Name: "queue", NameVerb: true, Verbs: []cli.Applet{
			{Name: "check", Run: ctx.QueueCheck},
			{Name: "claim", Run: ctx.QueueClaim},
			{Name: "exec", Run: ctx.QueueExec},
			{Name: "finish", Run: ctx.QueueFinish},
			{Name: "ingest", Run: ctx.QueueIngest},
			{Name: "publish", Run: ctx.QueuePublish},
			{Name: "recover", Run: ctx.QueueRecover},
			{Name: "status", Run: ctx.QueueStatus},
		},
			Missing: "missing verb (publish, claim, finish, recover, status, check, ingest, exec)",
			Unknown: "unknown verb %q"},
		{Name: "run", Run: ctx.RunRun},
		{Name: "secret", NameVerb: true, Verbs: []cli.Applet{
			{Name: "list", Run: ctx.RunSecretList},
			{Name: "rm", Run: ctx.RunSecretRm},
			{Name: "set", Run: ctx.RunSecretSet},
		},
			Missing: "missing verb: set, list or rm",
			Unknown: "unknown verb %q (want set, list or rm)"},
		{Name: "shared", NameVerb: true, Verbs: []cli.Applet{
			{Name: "new", Run: ctx.RunSharedNew},
		}, Unknown: "unknown verb %q (new)"},
		{Name: "validate-name", Run: ctx.RunValidateName},
	}
}

// runRow runs row with args, e.Name being its title ("fs.read", "ctx
// agent"): `ROW --help` prints its page's synopsis, `ROW VERB --help` the
// verb's help when its page's synopsis has that verb (not for a tool: `tsh
// fs.read --help` and `shell.exec grep --help` belong to what they run), a
// tool answers --agentrc-schema with its input schema, a row with verbs
// and no Run of its own runs the verb named, and any other row its Run. A
// hidden row (a re-exec target) has no help.
func runRow(e *cli.Env, row cli.Applet, args []string) int {
	if !row.Hidden && len(args) == 1 && isHelpFlag(args[0]) {
		return printHelp(e, row.Page)
	}
	if !row.Hidden && !row.Tool && len(args) == 2 && isHelpFlag(args[1]) {
		if text, ok := manual.VerbHelp(row.Page, e.Name, args[0]); ok {
			io.WriteString(e.Stdout, text)
			return cli.OK
		}
	}
	if row.Tool && len(args) == 1 && args[0] == "--agentrc-schema" {
		return toolrun.PrintToolSchema(e, row.Name)
	}
	if row.Run == nil {
		return runVerbs(e, row, args)
	}
	return row.Run(e, args)
}

// runVerbs runs the verb of row that args name. A missing or unknown verb
// is a usage error; `CMD VERB --help`, when the page's synopsis lacks the
// verb (runRow printed the verb's help otherwise), prints the command's
// synopsis.
func runVerbs(e *cli.Env, row cli.Applet, args []string) int {
	if len(args) == 0 {
		if row.Missing != "" {
			return cli.UsageError(e, "%s", row.Missing)
		}
		return cli.UsageError(e, "missing verb (%s)", verbNames(row.Verbs))
	}
	v, ok := findRow(row.Verbs, args[0])
	if !ok {
		if row.Unknown != "" {
			return cli.UsageError(e, row.Unknown, args[0])
		}
		return cli.UsageError(e, "unknown verb %s (%s)", args[0], verbNames(row.Verbs))
	}
	if row.NameVerb {
		e.Name += " " + v.Name
	}
	if len(args) == 2 && isHelpFlag(args[1]) {
		return printHelp(e, row.Page)
	}
	return v.Run(e, args[1:])
}

// findRow returns the row of rows called name.
func findRow(rows []cli.Applet, name string) (cli.Applet, bool) {
	for _, r := range rows {
		if r.Name == name {
			return r, true
		}
	}
	return cli.Applet{}, false
}

func verbNames(verbs []cli.Applet) string {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.Name
	}
	return strings.Join(names, ", ")
}
