package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/runhost"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/mcpstdio"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// ctxmcp serve: the tools of an agent (or of the caller) as an MCP
// server on stdio, each call decided and recorded as a tsh call is.

// CtxmcpServe is `ctxmcp serve [--root DIR] [--agent NAME [--unsandboxed]]
// [--timeout DURATION]`.
func CtxmcpServe(e *cli.Env, args []string) int {
	var rootFlag, agent, timeout string
	var unsandboxed bool
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.String("agent", &agent)
	f.String("timeout", &timeout)
	f.Bool("unsandboxed", &unsandboxed)
	if _, code, ok := cli.ParseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	// A context that cannot be established (a partial agent environment,
	// an unreadable identity) refuses here, once, rather than serving an
	// empty or a person's tool list.
	ctxt, err := authority.Context(e.Getenv)
	if err != nil {
		return cli.Fail(e, cli.Denied, "permission denied (agent-context): %s", cli.Escape(err.Error()))
	}
	onHost := ctxt.Agent == ""
	if agent == "" {
		agent = e.Getenv("CTX_AGENT")
	}
	if agent != "" {
		if err := policy.ValidName(agent); err != nil {
			return cli.UsageError(e, "--agent: %s", cli.Escape(err.Error()))
		}
	}
	var callTimeout time.Duration
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil || d <= 0 {
			return cli.UsageError(e, "--timeout %q is not a positive duration such as 2m", timeout)
		}
		callTimeout = d
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	// On the host, an agent's tools are served from inside its sandbox:
	// its run, started for this server or joined (serveSandboxed).
	if onHost && agent != "" {
		if !unsandboxed {
			return serveSandboxed(e, root, agent, timeout)
		}
		recordUnsandboxedServe(e, root, agent)
	}
	tools := servedTools(e, root, agent, ctxt.Strong(), callTimeout)
	// A client that gives up on us (SIGTERM after closing our input, as
	// the MCP spec has it) gets its calls cancelled down to their servers,
	// not their work left running: serve ends once they have.
	stop := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			close(stop)
		}
	}()
	opts := mcpstdio.ServeOptions{Name: "ctx", Version: object.CortexFSVersion, PollInterval: pollInterval, Stop: stop}
	if err := mcpstdio.Serve(e.Stdin, e.Stdout, tools, opts); err != nil {
		return cli.Fail(e, cli.Unavailable, "%s", cli.Escape(err.Error()))
	}
	return cli.OK
}

// servedTools are the tools ctxmcp serve offers: those on the agent's tool
// path (or the caller's) that it may see, run with its environment, each
// call decided as tsh would decide it; inSandbox, by name through
// /mnt/tools.
func servedTools(e *cli.Env, root fsops.Root, agent string, inSandbox bool, callTimeout time.Duration) *mcpstdio.PathTools {
	dirs := serveToolPath(e, root, agent)
	tools := &mcpstdio.PathTools{
		Dirs:       dirs,
		Visibility: func() func(fsops.ToolHit) bool { return toolrun.ToolVisibility(e, root, agent) },
		Env:        serveToolEnv(e, root, agent, dirs),
		Timeout:    callTimeout,
		Warn: func(format string, args ...any) {
			fmt.Fprintf(e.Stderr, "%s: %s\n", e.Name, cli.Escape(fmt.Sprintf(format, args...)))
		},
		Terminal:   terminalTool,
		SelfSchema: toolrun.MntSelfSchema,
		Refusal: func(hit fsops.ToolHit) (string, string, bool) {
			d := serveDecision(e, root, agent, hit)
			return string(d.Layer), d.Reason, !d.Allowed && d.Layer != ""
		},
		OnRefused: func(name, errno, layer, reason string) { recordServeRefusal(e, name, errno, layer, reason) },
	}
	if !inSandbox {
		// On the host agent.create, start, stop and update always fail:
		// they are requests to an agent's run host, and there is none.
		tools.Unoffered = func(name string) (string, bool) {
			if hostOperationTool(name) {
				return name + " runs only through the run host of an agent's run: serve an agent's tools from its sandbox (ctxmcp serve --agent AGENT, without --unsandboxed)", true
			}
			return "", false
		}
	}
	if inSandbox {
		// A tool the run refused is not in the sandbox's view; the run's
		// policy account says which layer refused it.
		tools.RefusedByName = func(name string) (string, string, bool) {
			return refusedInRun(agent, name)
		}
		// Inside a sandbox every call goes by the tool's name through
		// /mnt/tools, a link to ctx that asks the run host (a third-party
		// tool's own file would run unbrokered).
		tools.Run = brokeredRun
		tools.Revision = policyRevision(e)
		tools.Command = func(name, file string, argv, env []string) (string, []string) {
			if p := sandboxplan.SandboxMnt + "/tools/" + name; isFile(p) {
				return p, argv
			}
			return file, argv
		}
	}
	return tools
}

// policyRevision returns the state of the run's policy account
// (/mnt/proc/policy; CTX_RUN_DIR/policy in iso landlock): the run host
// rewrites it whenever a policy it is computed from changes, so a listing
// made since is still what the agent may see. Without one every listing is
// made afresh.
func policyRevision(e *cli.Env) func() string {
	account := policy.ProcPolicyPath
	if dir := e.Getenv("CTX_RUN_DIR"); dir != "" {
		if _, err := os.Stat(account); err != nil {
			account = filepath.Join(dir, "policy")
		}
	}
	return func() string {
		fi, err := os.Stat(account)
		if err != nil {
			return fsops.NewRunID() // never the same twice: no reuse
		}
		ino := uint64(0)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		return fmt.Sprintf("%d:%d:%d", ino, fi.Size(), fi.ModTime().UnixNano())
	}
}

// brokeredRun runs a served call inside a sandbox as /mnt/tools/NAME
// would, in this process: it asks the run host's broker, which decides
// the call, has the sandbox's init run the tool and records it. Without a
// broker to ask it hands the call back (handled false).
func brokeredRun(ctx context.Context, argv, env []string, stdin []byte, stdout, stderr io.Writer) (int, bool) {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	e := &cli.Env{Name: argv[0], Stdin: bytes.NewReader(stdin), Stdout: stdout, Stderr: stderr, Vars: env,
		Getenv: func(k string) string { return vars[k] }}
	return toolrun.BrokeredCallContext(ctx, e, argv[0], argv[1:])
}

// hostOperationTool reports ctx's tools that are requests to the run host
// (hostOperation), which fail wherever there is none.
func hostOperationTool(name string) bool {
	switch name {
	case "agent.create", "agent.start", "agent.stop", "agent.update":
		_, ok := toolrun.BuiltinTools[name]
		return ok
	}
	return false
}

// refusedInRun reads the run's policy account for a tool the run keeps out
// of the sandbox: the layer and the words tsh says for it.
func refusedInRun(agent, name string) (string, string, bool) {
	data, err := fsops.ReadControl(policy.ProcPolicyPath)
	if err != nil {
		return "", "", false
	}
	layer, ok := policy.ToolRefusal(data, name)
	if !ok {
		return "", "", false
	}
	return string(layer), "not visible to this agent, refused by " + string(layer) + " (explain: ctx policy explain " + agent + " tool:" + name + " execute)", true
}

// serveToolPath is the CTX_PATH served: the process CTX_PATH when set (in
// an agent sandbox it is authoritative), else the agent's path control,
// else <root>/tool:<root>/home/<uid>/tool. Served for an agent (in its
// context, or --agent on the host), the tiers the trust rule sets aside
// (DESIGN §16 rule 8) are left out, each with a warning.
func serveToolPath(e *cli.Env, root fsops.Root, agent string) []string {
	var a *policy.Agent
	if agent != "" {
		a, _ = authority.LoadAgent(root, agent)
	}
	dirs := root.DefaultToolPath(os.Getuid())
	tiers := dirs
	switch p := e.Getenv("CTX_PATH"); {
	case p != "":
		dirs = fsops.SplitToolPath(p)
		tiers = dirs
	case a != nil:
		dirs, tiers = authority.ToolDirs(root, a), a.Path
	}
	var tp authority.ToolPath
	if c, err := authority.CurrentCaller(e.Getenv); err == nil && c.InAgent() {
		tp = c.TrustedDirs(dirs)
	} else if agent != "" {
		tp = authority.LoadTrust(root).Filter(tiers, dirs)
	} else {
		return dirs // a person serving their own tools
	}
	for _, s := range tp.Skipped {
		fmt.Fprintf(e.Stderr, "%s: %s\n", e.Name, cli.Escape(policy.TierSkipLine(s.Tier, s.Reason)))
	}
	return tp.Dirs
}

// serveToolEnv is the environment served tools run with: PATH, the ctx
// context variables that are set, and the root, path and agent served.
func serveToolEnv(e *cli.Env, root fsops.Root, agent string, dirs []string) []string {
	env := []string{"PATH=/usr/bin:/bin", "CTX_ROOT=" + root.Dir, "CTX_PATH=" + strings.Join(dirs, ":")}
	for _, k := range []string{"CTX_HOME", "CTX_AGENT_SUBJECT", "CTX_RUN_FD", "HOME", "LANG"} {
		if v := e.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	if agent != "" {
		// Served tools run in agent A's context, so each re-checks its own
		// authority and logs its call as A's: outside a sandbox this is an
		// iso=shared run of A, with a session and a run id of its own.
		session, run := e.Getenv("CTX_SESSION"), e.Getenv("CTX_RUN_ID")
		if session == "" {
			session = "default"
		}
		if run == "" {
			run = fsops.NewRunID()
		}
		env = append(env, "CTX_AGENT="+agent, "CTX_SESSION="+session, "CTX_RUN_ID="+run)
	}
	return env
}

// terminalTool reports ctx's terminal-only tools: the interactive ones
// (bash, tmux, zellij) and tsh and tsh.config, which take a terminal or
// argv, not a JSON object; ctxmcp serve never offers them. (Any tool whose
// cap control lists "terminal" is left out too.)
func terminalTool(name string) bool {
	t, ok := toolrun.BuiltinTools[name]
	return ok && (t.Passthrough || name == toolrun.TshTool.Name || name == toolrun.TshConfigTool.Name)
}

// serveDecision is the authority decision behind toolVisibleTo, for the
// refusal a call of a tool that is not (or no longer) served gets: the
// layer and the reason, as tsh would print them.
func serveDecision(e *cli.Env, root fsops.Root, agent string, hit fsops.ToolHit) policy.Decision {
	deny := func(layer policy.Layer, reason string) policy.Decision {
		return policy.Decision{Layer: layer, Errno: syscall.EACCES, Reason: reason}
	}
	c, err := authority.CurrentCaller(e.Getenv)
	if err != nil {
		return deny("agent-context", err.Error())
	}
	if c.InAgent() {
		if agent != "" && agent != c.Agent.Name {
			return deny("agent-context", "this server serves agent "+c.Agent.Name+", not "+agent)
		}
		return c.CheckTrustedHit(hit)
	}
	if agent == "" {
		return policy.Decision{Allowed: true}
	}
	a, err := authority.LoadAgent(root, agent)
	if err != nil {
		return deny("agent-context", err.Error())
	}
	if ok, reason := authority.LoadTrust(root).Tool(hit); !ok {
		return deny(policy.LayerTrust, reason)
	}
	return authority.CheckHit(a, authority.View(root, a), hit)
}

// pollInterval is how often ctxmcp serve compares the tool set with the
// one its client listed (mcpstdio.ServeOptions.PollInterval).
var pollInterval = mcpstdio.DefaultPollInterval

// recordServeRefusal records a tools/call refused before any tool ran: the
// one tool.call event every call leaves (to the run host inside a run,
// else nowhere but stderr: there is no tool log to append to). A name that
// is not a valid object name is recorded as tool/invalid-name, its text in
// detail.
func recordServeRefusal(e *cli.Env, name, errno, layer, reason string) {
	exit := cli.ErrnoExit(toolrun.ErrnoByName(errno), cli.NotFound)
	ev := fsops.Event{Object: "tool/" + name, Status: "denied", Errno: errno, Layer: layer, Exit: &exit,
		Detail: reason}
	if !strings.HasPrefix(reason, "ctxmcp serve: ") {
		ev.Detail = "ctxmcp serve: " + reason
	}
	if policy.ValidName(name) != nil {
		ev.Object = "tool/invalid-name"
		ev.Detail += ": " + strconv.Quote(name)
	}
	if policy.ValidName(name) == nil {
		// Inside a run the host decides and records the refusal itself.
		quiet := *e
		quiet.Stderr = io.Discard
		if _, ok := toolrun.AskDecision(&quiet, name, false); ok {
			return
		}
	}
	if err := authority.RecordToolCall(e.Getenv, "", ev); err != nil {
		fmt.Fprintf(e.Stderr, "%s: warning: refused call of %s not logged: %v\n", e.Name, cli.Escape(name), err)
	}
}

// isFile reports whether p names something that exists (a link counts).
func isFile(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// serveSandboxed serves agent's tools for a client on the host from inside
// the agent's sandbox: it is `ctx agent start AGENT -- ctx ctxmcp serve`,
// which starts the agent's run with this server as its program, or, when
// the agent is running (another client's server, a person's session),
// joins that run with it. Either way every call has the agent's authority
// and lands in the agent's audit, and the run lasts until its last server
// has ended.
func serveSandboxed(e *cli.Env, root fsops.Root, agent, timeout string) int {
	o := runhost.Options{Root: root, Agent: agent, Command: []string{"ctx", "ctxmcp", "serve"}}
	if timeout != "" {
		o.Command = append(o.Command, "--timeout", timeout)
	}
	start := *e
	start.Name = "ctxmcp serve"
	return runhost.Start(&start, o)
}

// recordUnsandboxedServe writes, once per server, that agent's tools are
// served on the host unsandboxed (--unsandboxed): an agent.serve event in
// the agent's log.
func recordUnsandboxedServe(e *cli.Env, root fsops.Root, agent string) {
	fmt.Fprintf(e.Stderr, "%s: serving agent %s's tools on the host, unsandboxed (--unsandboxed)\n", e.Name, agent)
	ev := fsops.Event{Type: "agent.serve", Agent: agent, Object: "agent/" + agent, Status: "unsandboxed",
		Detail: "ctxmcp serve --unsandboxed: tools run on the host with the caller's uid"}
	if err := fsops.AppendLogEvent(filepath.Join(root.AgentControl(agent), "log"), ev); err != nil {
		fmt.Fprintf(e.Stderr, "%s: warning: not logged: %v\n", e.Name, err)
	}
}
