package applets

import (
	"io"
	"slices"
	"strings"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/manual"
)

// The dispatch table: every applet, every `ctx CMD` and every verb of
// either is one row (Applet) of one tree, table. `ctx` is a row whose verbs
// are the ctx commands (ctxCommands); `ctx agent` a row whose verbs are
// agent's. Dispatch (Main, runCtx), --help and VERB --help (runRow), --list
// and --install (Names), `ctx man` and the manual tests all read it; a
// command's verbs are run by one function, runVerbs.

// toolApplet makes the applet row of a builtin tool.
func toolApplet(t *builtinTool) Applet {
	builtinTools[t.Name] = t
	return Applet{Name: t.Name, Tool: true, Run: func(e *Env, args []string) int { return runTool(e, t, args) }}
}

// ownRunner makes the row of a tool implemented by its own applet (tsh,
// tsh.config) that still needs the metadata bootstrap writes.
func ownRunner(t *builtinTool, run func(*Env, []string) int) Applet {
	builtinTools[t.Name] = t
	return Applet{Name: t.Name, Tool: true, Run: run}
}

// ctxCommands are the verbs of the ctx row: `ctx CMD`, one file each
// (ctx_CMD.go), documented by manual/ctx-CMD.md.
var ctxCommands []Applet

// The table is filled in init, not in a composite literal, because the ctx
// applet lists the table and a literal would be an initialization cycle
// (cmd/go fills its command list in init for the same reason).
func init() {
	ctxCommands = ctxCommandRows()
	for i := range ctxCommands {
		ctxCommands[i].Page = "ctx-" + ctxCommands[i].Name
	}
	slices.SortFunc(ctxCommands, byName) // not sort.Slice: no reflection at every start

	table = []Applet{
		{Name: "ctx", Run: runCtx, Verbs: ctxCommands},
		{Name: fsops.SandboxInitApplet, Run: runSandboxInit, Hidden: true},
		{Name: fsops.UsernsHoldApplet, Run: runUsernsHold, Hidden: true},
		{Name: fsops.ConfineApplet, Run: runConfine, Hidden: true},
		{Name: fsops.ToolWorkerApplet, Run: runToolWorker, Hidden: true},
		{Name: fsops.UnixConnectorApplet, Run: func(*Env, []string) int { return fsops.RunUnixConnector() }, Hidden: true},
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
		{Name: "ctxmcp", Verbs: []Applet{
			{Name: "list", Run: ctxmcpList},
			{Name: "project", Run: ctxmcpProject},
			{Name: "serve", Run: ctxmcpServe},
		},
			Missing: "missing verb: list, project or serve",
			Unknown: "unknown verb %q (want list, project or serve)"},
		{Name: "ctxterm", Run: runCtxterm},
	}
	for i := range table {
		table[i].Page = table[i].Name
	}
	slices.SortFunc(table, byName)
}

func byName(a, b Applet) int { return strings.Compare(a.Name, b.Name) }

// ctxCommandRows are the rows of `ctx CMD`, before their pages are set
// and they are sorted.
func ctxCommandRows() []Applet {
	return []Applet{
		{Name: "agent", NameVerb: true, Verbs: []Applet{
			{Name: "attach", Run: runAgentAttach},
			{Name: "children", Run: runAgentChildren},
			{Name: "env", Run: runAgentEnv},
			{Name: "new", Run: runAgentNew},
			{Name: "ps", Run: runAgentPs},
			{Name: "start", Run: runAgentStart},
			{Name: "status", Run: runAgentStatus},
			{Name: "stop", Run: runAgentStop},
			{Name: "watch", Run: runAgentWatch},
		}},
		{Name: "bootstrap", Run: runBootstrap},
		{Name: "cat", Run: runCat},
		{Name: "doctor", Run: runDoctor},
		{Name: "ls", Run: runLs},
		{Name: "set", Run: runSet},
		{Name: "which", Run: runWhich},
		{Name: "man", Run: runMan},
		{Name: "policy", NameVerb: true, Verbs: []Applet{
			{Name: "allow", Run: runPolicyAllow},
			{Name: "check", Run: runPolicyCheck},
			{Name: "explain", Run: runPolicyExplain},
			{Name: "revoke", Run: runPolicyRevoke},
		}},
		{Name: "tool", Run: runCtxTool},
		{Name: "object", Verbs: []Applet{
			{Name: "check", Run: objectVerb("check")},
			{Name: "install", Run: objectVerb("install")},
			{Name: "inspect", Run: objectVerb("inspect")},
			{Name: "uninstall", Run: objectVerb("uninstall")},
		},
			Missing: "missing verb: check, install, inspect or uninstall",
			Unknown: "unknown verb %q (want check, install, inspect or uninstall)"},
		{Name: "queue", NameVerb: true, Verbs: []Applet{
			{Name: "check", Run: queueCheck},
			{Name: "claim", Run: queueClaim},
			{Name: "exec", Run: queueExec},
			{Name: "finish", Run: queueFinish},
			{Name: "ingest", Run: queueIngest},
			{Name: "publish", Run: queuePublish},
			{Name: "recover", Run: queueRecover},
			{Name: "status", Run: queueStatus},
		},
			Missing: "missing verb (publish, claim, finish, recover, status, check, ingest, exec)",
			Unknown: "unknown verb %q"},
		{Name: "run", Run: runRun},
		{Name: "shared", NameVerb: true, Verbs: []Applet{
			{Name: "new", Run: runSharedNew},
		}, Unknown: "unknown verb %q (new)"},
		{Name: "validate-name", Run: runValidateName},
	}
}

// runRow runs row with args, e.Name being its title ("fs.read", "ctx
// agent"): `ROW --help` prints its page's synopsis, `ROW VERB --help` the
// verb's help when its page's synopsis has that verb (not for a tool: `tsh
// fs.read --help` and `shell.exec grep --help` belong to what they run), a
// tool answers --agentrc-schema with its input schema, a row with verbs
// and no Run of its own runs the verb named, and any other row its Run. A
// hidden row (a re-exec target) has no help.
func runRow(e *Env, row Applet, args []string) int {
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
		return printToolSchema(e, row.Name)
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
func runVerbs(e *Env, row Applet, args []string) int {
	if len(args) == 0 {
		if row.Missing != "" {
			return usageError(e, "%s", row.Missing)
		}
		return usageError(e, "missing verb (%s)", verbNames(row.Verbs))
	}
	v, ok := findRow(row.Verbs, args[0])
	if !ok {
		if row.Unknown != "" {
			return usageError(e, row.Unknown, args[0])
		}
		return usageError(e, "unknown verb %s (%s)", args[0], verbNames(row.Verbs))
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
func findRow(rows []Applet, name string) (Applet, bool) {
	for _, r := range rows {
		if r.Name == name {
			return r, true
		}
	}
	return Applet{}, false
}

func verbNames(verbs []Applet) string {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.Name
	}
	return strings.Join(names, ", ")
}
