package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/mcpstdio"
	"ctx/policy"
)

// mcpFlags are the flags list and project share.
type mcpFlags struct {
	config, server string
	timeout        time.Duration
}

func (m *mcpFlags) register(f *cli.FlagSet, timeout *string) {
	f.String("config", &m.config)
	f.String("server", &m.server)
	f.String("timeout", timeout)
}

func (m *mcpFlags) check(e *cli.Env, timeout string) (int, bool) {
	if m.config == "" || m.server == "" {
		return cli.UsageError(e, "--config and --server are required"), false
	}
	if err := policy.ValidName(m.server); err != nil {
		return cli.UsageError(e, "--server: %s", cli.Escape(err.Error())), false
	}
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil || d <= 0 {
			return cli.UsageError(e, "--timeout %q is not a positive duration such as 30s", timeout), false
		}
		m.timeout = d
	}
	return 0, true
}

// listTools starts the configured server, lists its tools and stops it.
// It also returns the server's entry it started.
func (m *mcpFlags) listTools(e *cli.Env) ([]mcpstdio.Tool, mcpstdio.ServerConfig, int, bool) {
	var none mcpstdio.ServerConfig
	cfg, _, err := mcpstdio.ReadConfig(m.config)
	if err != nil {
		return nil, none, cli.Fail(e, cli.Unavailable, "%s", cli.Escape(err.Error())), false
	}
	srv, ok := cfg.Servers[m.server]
	if !ok {
		return nil, none, cli.Fail(e, cli.Unavailable, "config %s has no server %q", cli.Escape(m.config), m.server), false
	}
	c, err := mcpstdio.Start(m.server, srv, mcpstdio.Options{RequestTimeout: m.timeout})
	if err != nil {
		return nil, none, cli.Fail(e, cli.Unavailable, "%s", cli.Escape(err.Error())), false
	}
	tools, err := c.ListTools()
	c.Close()
	if err != nil {
		return nil, none, cli.Fail(e, cli.Unavailable, "%s", cli.Escape(err.Error())), false
	}
	return tools, srv, 0, true
}

func CtxmcpList(e *cli.Env, args []string) int {
	var m mcpFlags
	var timeout string
	f := cli.NewFlags()
	m.register(f, &timeout)
	if _, code, ok := cli.ParseArgs(e, f, args, 0, 0); !ok {
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
		fmt.Fprintf(e.Stdout, "%s.%s\t%s\n", m.server, cli.Escape(t.Name), cli.Escape(t.Description))
	}
	return cli.OK
}

func CtxmcpProject(e *cli.Env, args []string) int {
	var m mcpFlags
	var timeout, runtimeConfig, out, policyFile string
	f := cli.NewFlags()
	m.register(f, &timeout)
	f.String("runtime-config", &runtimeConfig)
	f.String("out", &out)
	f.String("policy-file", &policyFile)
	if _, code, ok := cli.ParseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	if code, ok := m.check(e, timeout); !ok {
		return code
	}
	switch {
	case object.IsReservedToolGroup(m.server):
		// SERVER.TOOL would land in a builtin group: a projected fs.read
		// would shadow the builtin one.
		return cli.UsageError(e, "--server %s: the name of a builtin tool group (%s); its tools would shadow ctx's own: give the server another name in the config", m.server, strings.Join(object.ReservedToolGroups, " "))
	case runtimeConfig == "" || out == "":
		return cli.UsageError(e, "--runtime-config and --out are required")
	case !filepath.IsAbs(runtimeConfig) || filepath.Clean(runtimeConfig) != runtimeConfig:
		return cli.UsageError(e, "--runtime-config %q must be an absolute, clean path", cli.Escape(runtimeConfig))
	}
	// Refuse an existing output before starting anything.
	if _, err := os.Lstat(out); err == nil {
		return cli.Fail(e, cli.Unavailable, "%s already exists (output directories are never replaced)", cli.Escape(out))
	}
	pol, code, ok := projectPolicy(e, policyFile)
	if !ok {
		return code
	}
	exe, exeSum, err := selfExecutable()
	if err != nil {
		return cli.Fail(e, cli.Internal, "%v", err)
	}
	tools, srv, code, ok := m.listTools(e)
	if !ok {
		return code
	}
	entrySum, err := runtimeEntryDigest(e, runtimeConfig, m.server, srv)
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "%s", cli.Escape(err.Error()))
	}
	cands, skipped, err := mcpstdio.Project(mcpstdio.Projection{
		Server: m.server, Executable: exe, ExecSHA256: exeSum,
		RuntimeConfig: runtimeConfig, EntrySHA256: entrySum, Policy: pol,
	}, tools)
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "server %s: %s; nothing written", m.server, cli.Escape(err.Error()))
	}
	for _, s := range skipped {
		fmt.Fprintf(e.Stderr, "%s: skipped %s: %s\n", e.Name, cli.Escape(s.Name), s.Reason)
	}
	for _, c := range cands {
		for _, n := range c.Notes {
			fmt.Fprintf(e.Stderr, "%s: note: %s: %s\n", e.Name, cli.Escape(c.Name), cli.Escape(n))
		}
	}
	if len(cands) == 0 {
		return cli.Fail(e, cli.Unavailable, "server %s offers no tool to project; nothing written", m.server)
	}
	files := make([]object.File, len(cands))
	for i, c := range cands {
		files[i] = object.File{Name: c.File, Data: c.Manifest}
	}
	if err := object.WriteNewDir(out, "ctxmcp-project", files); err != nil {
		return cli.Fail(e, cli.Unavailable, "%s", cli.Escape(err.Error()))
	}
	for _, c := range cands {
		fmt.Fprintln(e.Stdout, cli.Escape(filepath.Join(out, c.File)))
	}
	return cli.OK
}

// projectPolicy reads and checks --policy-file, the policy control every
// projected tool gets ("" without one). On failure it has printed the
// error and returns the exit code.
func projectPolicy(e *cli.Env, policyFile string) (string, int, bool) {
	if policyFile == "" {
		return "", cli.OK, true
	}
	b, err := fsops.ReadControl(policyFile)
	if err != nil {
		return "", cli.Fail(e, cli.Unavailable, "--policy-file: %s", cli.Escape(err.Error())), false
	}
	if err := object.ValidateControl("tool", "policy", b); err != nil {
		return "", cli.Fail(e, cli.Usage, "--policy-file %s: %s", cli.Escape(policyFile), cli.Escape(err.Error())), false
	}
	return string(b), cli.OK, true
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

// runtimeEntryDigest is the digest the locator records: the EntryDigest of
// the server's entry in the runtime config when that is readable here;
// when it does not exist here (it may only exist inside the agent's view,
// e.g. /workspace/.mcp.json), of the entry in --config, which the runtime
// config's entry must then equal (the file around it may differ): the
// projected tool verifies the digest on every call.
func runtimeEntryDigest(e *cli.Env, path, server string, fromConfig mcpstdio.ServerConfig) (string, error) {
	cfg, _, err := mcpstdio.ReadConfig(path)
	switch {
	case err == nil:
		srv, ok := cfg.Servers[server]
		if !ok {
			return "", fmt.Errorf("runtime config %s has no server %q", path, server)
		}
		return mcpstdio.EntryDigest(srv), nil
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrPermission):
		fmt.Fprintf(e.Stderr, "%s: note: runtime config %s is not readable here (%s); the digest of server %s's entry is taken from --config, so the runtime config's entry must be the same\n",
			e.Name, cli.Escape(path), errText(err), server)
		return mcpstdio.EntryDigest(fromConfig), nil
	}
	return "", fmt.Errorf("runtime %v", err)
}

// errText describes err by its errno when it has one.
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}
