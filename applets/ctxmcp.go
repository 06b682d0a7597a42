package applets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ctx/applets/authority"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/mcpstdio"
	"ctx/policy"
	"ctx/ptyterm"
)

// runCtxmcp is `ctxmcp list|project|serve`.
func runCtxmcp(e *Env, args []string) int {
	if len(args) == 0 {
		return usageError(e, "missing verb: list, project or serve")
	}
	switch args[0] {
	case "list":
		return ctxmcpList(e, args[1:])
	case "project":
		return ctxmcpProject(e, args[1:])
	case "serve":
		return ctxmcpServe(e, args[1:])
	}
	return usageError(e, "unknown verb %q (want list, project or serve)", args[0])
}

// mcpFlags are the flags list and project share.
type mcpFlags struct {
	config, server string
	timeout        time.Duration
}

func (m *mcpFlags) register(f *flagSet, timeout *string) {
	f.String("config", &m.config)
	f.String("server", &m.server)
	f.String("timeout", timeout)
}

func (m *mcpFlags) check(e *Env, timeout string) (int, bool) {
	if m.config == "" || m.server == "" {
		return usageError(e, "--config and --server are required"), false
	}
	if err := policy.ValidName(m.server); err != nil {
		return usageError(e, "--server: %s", ptyterm.Escape(err.Error())), false
	}
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil || d <= 0 {
			return usageError(e, "--timeout %q is not a positive duration such as 30s", timeout), false
		}
		m.timeout = d
	}
	return 0, true
}

// listTools starts the configured server, lists its tools and stops it.
// It also returns the config bytes it read.
func (m *mcpFlags) listTools(e *Env) ([]mcpstdio.Tool, []byte, int, bool) {
	cfg, data, err := mcpstdio.ReadConfig(m.config)
	if err != nil {
		return nil, nil, fail(e, exitUnavailable, "%s", ptyterm.Escape(err.Error())), false
	}
	srv, ok := cfg.Servers[m.server]
	if !ok {
		return nil, nil, fail(e, exitUnavailable, "config %s has no server %q", ptyterm.Escape(m.config), m.server), false
	}
	c, err := mcpstdio.Start(m.server, srv, mcpstdio.Options{RequestTimeout: m.timeout})
	if err != nil {
		return nil, nil, fail(e, exitUnavailable, "%s", ptyterm.Escape(err.Error())), false
	}
	tools, err := c.ListTools()
	c.Close()
	if err != nil {
		return nil, nil, fail(e, exitUnavailable, "%s", ptyterm.Escape(err.Error())), false
	}
	return tools, data, 0, true
}

func ctxmcpList(e *Env, args []string) int {
	var m mcpFlags
	var timeout string
	f := newFlags()
	m.register(f, &timeout)
	if _, code, ok := parseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	if code, ok := m.check(e, timeout); !ok {
		return code
	}
	tools, _, code, ok := m.listTools(e)
	if !ok {
		return code
	}
	for _, t := range tools {
		fmt.Fprintf(e.Stdout, "%s.%s\t%s\n", m.server, ptyterm.Escape(t.Name), ptyterm.Escape(t.Description))
	}
	return exitOK
}

func ctxmcpProject(e *Env, args []string) int {
	var m mcpFlags
	var timeout, runtimeConfig, out, policyFile string
	f := newFlags()
	m.register(f, &timeout)
	f.String("runtime-config", &runtimeConfig)
	f.String("out", &out)
	f.String("policy-file", &policyFile)
	if _, code, ok := parseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	if code, ok := m.check(e, timeout); !ok {
		return code
	}
	switch {
	case runtimeConfig == "" || out == "":
		return usageError(e, "--runtime-config and --out are required")
	case !filepath.IsAbs(runtimeConfig) || filepath.Clean(runtimeConfig) != runtimeConfig:
		return usageError(e, "--runtime-config %q must be an absolute, clean path", ptyterm.Escape(runtimeConfig))
	}
	// Refuse an existing output before starting anything.
	if _, err := os.Lstat(out); err == nil {
		return fail(e, exitUnavailable, "%s already exists (output directories are never replaced)", ptyterm.Escape(out))
	}
	var pol string
	if policyFile != "" {
		b, err := fsops.ReadControl(policyFile)
		if err != nil {
			return fail(e, exitUnavailable, "--policy-file: %s", ptyterm.Escape(err.Error()))
		}
		if err := object.ValidateControl("tool", "policy", b); err != nil {
			return fail(e, exitUsage, "--policy-file %s: %s", ptyterm.Escape(policyFile), ptyterm.Escape(err.Error()))
		}
		pol = string(b)
	}
	exe, exeSum, err := selfExecutable()
	if err != nil {
		return fail(e, exitInternal, "%v", err)
	}
	tools, configData, code, ok := m.listTools(e)
	if !ok {
		return code
	}
	configSum, err := runtimeConfigDigest(e, runtimeConfig, configData)
	if err != nil {
		return fail(e, exitUnavailable, "%s", ptyterm.Escape(err.Error()))
	}
	cands, skipped, err := mcpstdio.Project(mcpstdio.Projection{
		Server: m.server, Executable: exe, ExecSHA256: exeSum,
		RuntimeConfig: runtimeConfig, ConfigSHA256: configSum, Policy: pol,
	}, tools)
	if err != nil {
		return fail(e, exitUnavailable, "server %s: %s; nothing written", m.server, ptyterm.Escape(err.Error()))
	}
	for _, s := range skipped {
		fmt.Fprintf(e.Stderr, "%s: skipped %s: %s\n", e.Name, ptyterm.Escape(s.Name), s.Reason)
	}
	if len(cands) == 0 {
		return fail(e, exitUnavailable, "server %s offers no tool to project; nothing written", m.server)
	}
	files := make([]object.File, len(cands))
	for i, c := range cands {
		files[i] = object.File{Name: c.File, Data: c.Manifest}
	}
	if err := object.WriteNewDir(out, "ctxmcp-project", files); err != nil {
		return fail(e, exitUnavailable, "%s", ptyterm.Escape(err.Error()))
	}
	for _, c := range cands {
		fmt.Fprintln(e.Stdout, ptyterm.Escape(filepath.Join(out, c.File)))
	}
	return exitOK
}

// selfExecutable is this binary's resolved path and SHA-256: the artifact
// of every projected tool.
func selfExecutable() (string, string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", "", fmt.Errorf("cannot find own executable: %v", err)
	}
	f, err := fsops.OpenRegular(exe)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", "", err
	}
	return exe, hex.EncodeToString(h.Sum(nil)), nil
}

// runtimeConfigDigest is the SHA-256 the locator records: of the runtime
// config when it is readable here; when it does not exist here (it may only
// exist inside the agent's view, e.g. /workspace/.mcp.json), of --config's
// bytes, which the runtime config must then equal byte for byte: the
// projected tool verifies the digest on every call.
func runtimeConfigDigest(e *Env, path string, configData []byte) (string, error) {
	data, err := fsops.ReadRegular(path, mcpstdio.MaxConfigSize)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrPermission):
		fmt.Fprintf(e.Stderr, "%s: note: runtime config %s is not readable here (%s); its digest is taken from --config, so it must be the same bytes\n",
			e.Name, ptyterm.Escape(path), errText(err))
		data = configData
	default:
		return "", fmt.Errorf("runtime config: %v", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// errText describes err by its errno when it has one.
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

func ctxmcpServe(e *Env, args []string) int {
	var rootFlag, agent, timeout string
	f := newFlags()
	f.String("root", &rootFlag)
	f.String("agent", &agent)
	f.String("timeout", &timeout)
	if _, code, ok := parseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	// A context that cannot be established (a partial agent environment,
	// an unreadable identity) refuses here, once, rather than serving an
	// empty or a person's tool list.
	if _, err := authority.Context(e.Getenv); err != nil {
		return fail(e, exitDenied, "permission denied (agent-context): %s", ptyterm.Escape(err.Error()))
	}
	if agent == "" {
		agent = e.Getenv("CTX_AGENT")
	}
	if agent != "" {
		if err := policy.ValidName(agent); err != nil {
			return usageError(e, "--agent: %s", ptyterm.Escape(err.Error()))
		}
	}
	var callTimeout time.Duration
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil || d <= 0 {
			return usageError(e, "--timeout %q is not a positive duration such as 2m", timeout)
		}
		callTimeout = d
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	dirs := serveToolPath(e, root, agent)
	tools := &mcpstdio.PathTools{
		Dirs:    dirs,
		Visible: func(hit fsops.ToolHit) bool { return toolVisibleTo(e, root, agent, hit) },
		Env:     serveToolEnv(e, root, agent, dirs),
		Timeout: callTimeout,
		Warn: func(format string, args ...any) {
			fmt.Fprintf(e.Stderr, "%s: %s\n", e.Name, ptyterm.Escape(fmt.Sprintf(format, args...)))
		},
		OnRefused: func(name, reason string) { recordServeRefusal(e, name, reason) },
	}
	if err := mcpstdio.Serve(e.Stdin, e.Stdout, tools, mcpstdio.ServeOptions{Name: "ctx", Version: object.CortexFSVersion}); err != nil {
		return fail(e, exitUnavailable, "%s", ptyterm.Escape(err.Error()))
	}
	return exitOK
}

// serveToolPath is the CTX_PATH served: the process CTX_PATH when set (in
// an agent sandbox it is authoritative), else the agent's path control,
// else <root>/tool:<root>/home/<uid>/tool. Served for an agent (in its
// context, or --agent on the host), the tiers the trust rule sets aside
// (DESIGN §16 rule 8) are left out, each with a warning.
func serveToolPath(e *Env, root fsops.Root, agent string) []string {
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
		fmt.Fprintf(e.Stderr, "%s: %s\n", e.Name, ptyterm.Escape(policy.TierSkipLine(s.Tier, s.Reason)))
	}
	return tp.Dirs
}

// serveToolEnv is the environment served tools run with: PATH, the ctx
// context variables that are set, and the root, path and agent served.
func serveToolEnv(e *Env, root fsops.Root, agent string, dirs []string) []string {
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

// recordServeRefusal records a tools/call refused before any tool ran: the
// one tool.call event every call leaves (to the run host inside a run,
// else nowhere but stderr: there is no tool log to append to). A name that
// is not a valid object name is recorded as tool/invalid-name, its text in
// detail.
func recordServeRefusal(e *Env, name, reason string) {
	exit := exitNotFound
	ev := fsops.Event{Object: "tool/" + name, Status: "denied", Errno: "ENOENT", Layer: "mount-visibility", Exit: &exit,
		Detail: "ctxmcp serve: " + reason}
	if policy.ValidName(name) != nil {
		ev.Object = "tool/invalid-name"
		ev.Detail += ": " + strconv.Quote(name)
	}
	if err := authority.RecordToolCall(e.Getenv, "", ev); err != nil {
		fmt.Fprintf(e.Stderr, "%s: warning: refused call of %s not logged: %v\n", e.Name, ptyterm.Escape(name), err)
	}
}
