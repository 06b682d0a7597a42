package mcp

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// These tests run the real ctx binary against real MCP peers from the
// fixture module testdata/mcpserver: the official Go SDK's client and
// server, and hand-written misbehaving servers.

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	// go test puts GOROOT/bin first on the test's PATH, so this is only
	// reached when the test binary runs on its own: let the exec fail there.
	return "go"
}

// binaries builds ctx and the fixture (server, client) once.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ctx-applets-test-")
		if err != nil {
			buildErr = err
			return
		}
		for _, b := range []struct{ dir, out string }{{"../..", dir + "/ctx"}, {"../../testdata/mcpserver", dir + "/"}} {
			args := []string{"build", "-buildvcs=false", "-o", b.out, "."}
			if b.dir != "../.." {
				args = []string{"build", "-buildvcs=false", "-o", b.out, "./server", "./client"}
			}
			cmd := exec.Command(goTool(), args...)
			cmd.Dir = b.dir
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go %v in %s: %v\n%s", args, b.dir, err, out)
				return
			}
		}
		buildDir = dir
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// run runs ctx (or a tool path) with a clean environment plus env.
func run(t *testing.T, dir string, env []string, argv ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "CTX_ROOT="}, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return stdout.String(), stderr.String(), code
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// projectAndInstall projects server from cfg and installs the tools named
// into root's system tier.
func projectAndInstall(t *testing.T, bin, work, cfg, server, root string, tools ...string) {
	t.Helper()
	out := filepath.Join(work, "manifests-"+server)
	_, stderr, code := run(t, work, nil, bin+"/ctx", "ctxmcp", "project", "--config", cfg, "--runtime-config", cfg, "--server", server, "--out", out)
	if code != 0 {
		t.Fatalf("project %s: exit %d: %s", server, code, stderr)
	}
	for _, tool := range tools {
		_, stderr, code := run(t, work, nil, bin+"/ctx", "object", "install", "--root", root, "--tier", "system", filepath.Join(out, server+"."+tool+".manifest.json"))
		if code != 0 {
			t.Fatalf("install %s.%s: exit %d: %s", server, tool, code, stderr)
		}
	}
}

type clientReport struct {
	Protocol string            `json:"protocol"`
	Server   string            `json:"server"`
	Ping     string            `json:"ping"`
	Tools    []json.RawMessage `json:"tools"`
	Calls    []struct {
		Name    string   `json:"name"`
		IsError bool     `json:"isError"`
		Text    []string `json:"text"`
		Err     string   `json:"err"`
	} `json:"calls"`
}

func TestServeWithGoSDKClient(t *testing.T) {
	bin := binaries(t)
	work := t.TempDir()
	root := filepath.Join(work, "root")
	tool := filepath.Join(root, "tool")
	writeFile(t, filepath.Join(tool, "say"), "#!/bin/sh\nprintf 'args=%s mode=%s agent=%s\\n' \"$1\" \"$CTX_TOOL_MODE\" \"$CTX_AGENT\"\n", 0o755)
	writeFile(t, filepath.Join(tool, "say.d", "description"), "Say what you got.\n", 0o644)
	writeFile(t, filepath.Join(tool, "say.d", "schema"), `{"type":"object","properties":{"a":{"type":"integer"}}}`+"\n", 0o644)
	writeFile(t, filepath.Join(tool, "boom"), "#!/bin/sh\necho partial\necho it broke >&2\nexit 3\n", 0o755)
	writeFile(t, filepath.Join(tool, "broken"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(tool, "broken.d", "schema"), `{"type":"nope"}`, 0o644)
	writeFile(t, filepath.Join(tool, "notes.txt"), "not executable", 0o644)
	cfg := filepath.Join(work, "mcp.json")
	writeFile(t, cfg, fmt.Sprintf(`{"mcpServers":{"gosdk":{"command":%q,"args":["sdk"]}}}`, bin+"/server"), 0o644)
	projectAndInstall(t, bin, work, cfg, "gosdk", root, "greet", "fail")

	serve := func(extra []string, args ...string) clientReport {
		t.Helper()
		argv := append([]string{bin + "/client"}, args...)
		argv = append(argv, "--", bin+"/ctx", "ctxmcp", "serve", "--root", root)
		argv = append(argv, extra...)
		stdout, stderr, code := run(t, work, nil, argv...)
		if code != 0 {
			t.Fatalf("client: exit %d: %s", code, stderr)
		}
		var r clientReport
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("client output %q: %v", stdout, err)
		}
		return r
	}

	r := serve(nil, "-call", `say={"a":1}`, "-call", "boom={}", "-call", `gosdk.greet={"name":"ctx"}`,
		"-call", "gosdk.fail={}", "-call", `gosdk.greet={"name":3}`, "-call", "nope={}")
	// The SDK client probes server/discover (draft 2026-07-28) first; the
	// -32601 answer makes it fall back to initialize with 2025-11-25.
	if r.Protocol != "2025-11-25" || r.Server != "ctx" || r.Ping != "ok" {
		t.Fatalf("session: %+v", r)
	}
	var names []string
	for _, raw := range r.Tools {
		var tl struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		json.Unmarshal(raw, &tl)
		names = append(names, tl.Name)
		if tl.Name == "say" && (tl.Description != "Say what you got." || !strings.Contains(string(tl.InputSchema), `"a"`)) {
			t.Errorf("say listed as %s", raw)
		}
		if tl.Name == "gosdk.greet" && !strings.Contains(string(tl.InputSchema), `"name"`) {
			t.Errorf("gosdk.greet listed as %s", raw)
		}
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[boom gosdk.fail gosdk.greet say]" {
		t.Fatalf("tools %v (broken schema and non-executables must be left out)", names)
	}
	// Text blocks of each call joined by "|". A tool that writes no native
	// frames (say, boom) is taken as plain text: a failing one's stdout and
	// stderr are separate blocks. A projected tool's blocks are the
	// server's own, its remote error text included; it validates its input
	// against its schema control before it starts the server.
	want := []struct {
		isError bool
		text    string
		err     string
	}{
		{false, `args={"a":1} mode=native agent=` + "\n", ""},
		{true, "partial\n|it broke\n", ""},
		{false, `{"greeting":"Hi ctx"}`, ""},
		{true, "it failed on purpose", ""},
		{true, "gosdk.greet: EINVAL: input #/name: expected string, got integer", ""},
		{false, "", "Unknown tool: nope"},
	}
	if len(r.Calls) != len(want) {
		t.Fatalf("calls %+v", r.Calls)
	}
	for i, w := range want {
		c := r.Calls[i]
		got := strings.Join(c.Text, "|")
		if w.err != "" {
			if !strings.Contains(c.Err, w.err) {
				t.Errorf("call %d %s: err %q, want %q", i, c.Name, c.Err, w.err)
			}
			continue
		}
		if c.Err != "" || c.IsError != w.isError || got != w.text {
			t.Errorf("call %d %s: isError=%v text %q err %q, want %v %q", i, c.Name, c.IsError, got, c.Err, w.isError, w.text)
		}
	}

	// A client asking for an older stable version gets it.
	if r := serve(nil, "-version", "2024-11-05"); r.Protocol != "2024-11-05" {
		t.Fatalf("protocol %q", r.Protocol)
	}
	// For an agent, nothing is listed until the authority check is wired.
	if r := serve([]string{"--agent", "coder", "--unsandboxed"}); len(r.Tools) != 0 {
		t.Fatalf("agent listing %v", r.Tools)
	}
}

// A projected tool's server crashing mid-call: EIO, exit 69, and the
// server's process group (grandchild included) is gone.
func TestProjectedToolServerCrash(t *testing.T) {
	bin := binaries(t)
	work := t.TempDir()
	root := filepath.Join(work, "root")
	os.MkdirAll(filepath.Join(root, "tool"), 0o755)
	pids := filepath.Join(work, "pids")
	cfg := filepath.Join(work, "mcp.json")
	writeFile(t, cfg, fmt.Sprintf(`{"mcpServers":{"crashy":{"command":%q,"args":["grandcrash"],"env":{"FIXTURE_PIDS":%q}},"good":{"command":%q,"args":["good"]}}}`,
		bin+"/server", pids, bin+"/server"), 0o644)
	projectAndInstall(t, bin, work, cfg, "crashy", root, "echo")
	projectAndInstall(t, bin, work, cfg, "good", root, "image", "add", "echo")
	os.Remove(pids) // drop the pids of the listing runs

	stdout, stderr, code := run(t, work, nil, filepath.Join(root, "tool", "crashy.echo"), `{"message":"x"}`)
	if code != 69 || !strings.Contains(stderr, "crashy.echo: EIO: server crashy: tools/call:") || !strings.Contains(stderr, "fatal: crashing mid-call") || stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		_, pid, _ := strings.Cut(l, " ")
		if _, err := os.Stat("/proc/" + pid); err == nil {
			if n, _ := strconv.Atoi(pid); n > 0 {
				t.Errorf("%s still exists after the tool exited", l)
			}
		}
	}

	// Non-text blocks are one readable note each; structuredContent equal
	// to the text is not repeated; different structuredContent is.
	stdout, _, code = run(t, work, nil, filepath.Join(root, "tool", "good.image"))
	if code != 0 || stdout != "an image follows\n[image: image/png, 8 bytes]\n" {
		t.Fatalf("image: %d %q", code, stdout)
	}
	stdout, _, code = run(t, work, nil, filepath.Join(root, "tool", "good.add"), `{"a":1,"b":2}`)
	if code != 0 || stdout != `{"sum":3}`+"\n" {
		t.Fatalf("add: %d %q", code, stdout)
	}
	stdout, _, code = run(t, work, nil, filepath.Join(root, "tool", "good.echo"), `{"message":"m"}`)
	if code != 0 || stdout != "Echo: m\n"+`{"echoed":"m"}`+"\n" {
		t.Fatalf("echo: %d %q", code, stdout)
	}
}
