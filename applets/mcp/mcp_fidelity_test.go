package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// These tests follow MCP content end to end: a real stdio server (the
// official Go SDK's, and the hand-written fixture's "rich" mode, which
// sends every content type), projected and installed as ctx tools, served
// again by `ctx ctxmcp serve` to the official Go SDK client.

type fidelityCall struct {
	Name     string          `json:"name"`
	IsError  bool            `json:"isError"`
	Text     []string        `json:"text"`
	Err      string          `json:"err"`
	Raw      json.RawMessage `json:"raw"`
	Progress []struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
		Message  string  `json:"message"`
	} `json:"progress"`
	MS int64 `json:"ms"`
}

type fidelityReport struct {
	Protocol    string            `json:"protocol"`
	Tools       []json.RawMessage `json:"tools"`
	Calls       []fidelityCall    `json:"calls"`
	ListChanged int               `json:"listChanged"`
	ToolsAfter  []string          `json:"toolsAfter"`
	AfterCalls  []fidelityCall    `json:"afterCalls"`
}

type listedTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Annotations  json.RawMessage `json:"annotations"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	InputSchema  json.RawMessage `json:"inputSchema"`
}

// fidelityClient runs the SDK client against `ctx ctxmcp serve ARGS`.
func fidelityClient(t *testing.T, bin, work string, clientArgs []string, serveArgs ...string) fidelityReport {
	t.Helper()
	argv := append([]string{bin + "/client"}, clientArgs...)
	argv = append(argv, "--", bin+"/ctx", "ctxmcp", "serve")
	argv = append(argv, serveArgs...)
	stdout, stderr, code := run(t, work, nil, argv...)
	return fidelityResult(t, stdout, stderr, code)
}

// fidelityResult decodes the client's report.
func fidelityResult(t *testing.T, stdout, stderr string, code int) fidelityReport {
	t.Helper()
	if code != 0 {
		t.Fatalf("client: exit %d: %s", code, stderr)
	}
	var r fidelityReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("client output %q: %v", stdout, err)
	}
	return r
}

func (r fidelityReport) tool(t *testing.T, name string) listedTool {
	t.Helper()
	for _, raw := range r.Tools {
		var lt listedTool
		json.Unmarshal(raw, &lt)
		if lt.Name == name {
			return lt
		}
	}
	t.Fatalf("tool %s not listed", name)
	return listedTool{}
}

// bootstrapRoot makes a reference tree (builtin tools with their
// annotations) under work.
func bootstrapRoot(t *testing.T, bin, work string) string {
	t.Helper()
	root := filepath.Join(work, "root")
	if _, stderr, code := run(t, work, nil, bin+"/ctx", "bootstrap", "--root", root); code != 0 {
		t.Fatalf("bootstrap: %d %s", code, stderr)
	}
	return root
}

// subsetJSON reports whether every field of the object want has the same
// value in got. (The report holds the SDK's own re-encoding of what it
// received, which adds the hints it defaults, such as idempotentHint
// false.)
func subsetJSON(t *testing.T, want string, got json.RawMessage) bool {
	t.Helper()
	var w, g map[string]any
	if json.Unmarshal([]byte(want), &w) != nil || json.Unmarshal(got, &g) != nil {
		return false
	}
	for k, v := range w {
		if fmt.Sprint(g[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// canonJSON re-encodes a JSON value with sorted keys, for comparison.
func canonJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// The rich fixture's result, as the server sends it: every content type.
const richContent = `[{"text":"rich result","type":"text"},{"data":"iVBORw0KGgo=","mimeType":"image/png","type":"image"},` +
	`{"data":"UklGRiQAAABXQVZF","mimeType":"audio/wav","type":"audio"},` +
	`{"resource":{"mimeType":"text/plain","text":"hello notes","uri":"file:///notes.txt"},"type":"resource"},` +
	`{"resource":{"blob":"AAECAw==","mimeType":"application/octet-stream","uri":"file:///b.bin"},"type":"resource"},` +
	`{"mimeType":"text/markdown","name":"README","type":"resource_link","uri":"file:///README.md"}]`

func TestServeFullFidelity(t *testing.T) {
	bin := binaries(t)
	work := t.TempDir()
	root := bootstrapRoot(t, bin, work)
	events := filepath.Join(work, "events")
	pids := filepath.Join(work, "pids")
	cfg := filepath.Join(work, "mcp.json")
	writeFile(t, cfg, fmt.Sprintf(`{"mcpServers":{"rich":{"command":%q,"args":["rich"],"env":{"FIXTURE_EVENTS":%q,"FIXTURE_PIDS":%q}},"gosdk":{"command":%q,"args":["sdk"]}}}`,
		bin+"/server", events, pids, bin+"/server"), 0o644)
	projectAndInstall(t, bin, work, cfg, "rich", root, "rich", "slow")
	projectAndInstall(t, bin, work, cfg, "gosdk", root, "picture", "greet")
	os.Remove(pids)

	// A projected tool is a hard link of the tree's bin/ctx, not a copy.
	if !sameInode(t, filepath.Join(root, "tool", "rich.rich"), filepath.Join(root, "bin", "ctx")) {
		t.Error("rich.rich is not a hard link of bin/ctx")
	}

	r := fidelityClient(t, bin, work, []string{"-progress", "-call", "rich.rich={}", "-call", "gosdk.picture={}",
		"-cancel", "rich.slow={}@progress:2"}, "--root", root)

	// Terminal-only tools are not offered; the others are, fully described.
	var names []string
	for _, raw := range r.Tools {
		var lt listedTool
		json.Unmarshal(raw, &lt)
		names = append(names, lt.Name)
	}
	sort.Strings(names)
	for _, terminal := range []string{"bash", "tmux", "zellij", "tsh", "tsh.config"} {
		for _, n := range names {
			if n == terminal {
				t.Errorf("terminal tool %s offered over MCP", n)
			}
		}
	}
	for name, want := range map[string]struct{ title, annotations, output string }{
		"fs.read":       {"Read file", `{"openWorldHint":false,"readOnlyHint":true,"title":"Read file"}`, ""},
		"fs.write":      {"Write file", `{"destructiveHint":true,"idempotentHint":true,"openWorldHint":false,"readOnlyHint":false,"title":"Write file"}`, ""},
		"shell.exec":    {"Run shell command", `{"destructiveHint":true,"idempotentHint":false,"openWorldHint":true,"readOnlyHint":false,"title":"Run shell command"}`, ""},
		"rich.rich":     {"Rich result", `{"openWorldHint":false,"readOnlyHint":true,"title":"Rich result"}`, `{"properties":{"items":{"items":{"type":"string"},"type":"array"},"sum":{"type":"number"}},"type":"object"}`},
		"gosdk.picture": {"Picture", `{"idempotentHint":true,"openWorldHint":false,"readOnlyHint":true,"title":"Picture"}`, "width"},
		"gosdk.greet":   {"", `{"readOnlyHint":true}`, "greeting"},
	} {
		lt := r.tool(t, name)
		if lt.Title != want.title || !subsetJSON(t, want.annotations, lt.Annotations) {
			t.Errorf("%s: title %q annotations %s", name, lt.Title, lt.Annotations)
		}
		switch {
		case want.output == "":
			if len(lt.OutputSchema) != 0 {
				t.Errorf("%s: outputSchema %s", name, lt.OutputSchema)
			}
		case strings.HasPrefix(want.output, "{"):
			if canonJSON(t, lt.OutputSchema) != want.output {
				t.Errorf("%s: outputSchema %s", name, lt.OutputSchema)
			}
		case !strings.Contains(string(lt.OutputSchema), want.output):
			t.Errorf("%s: outputSchema %s", name, lt.OutputSchema)
		}
	}

	// Every content block and the structured content arrive as the server
	// sent them, through the projected tool and ctxmcp serve.
	if len(r.Calls) != 3 {
		t.Fatalf("calls %+v", r.Calls)
	}
	var rich struct {
		Content    json.RawMessage `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	if c := r.Calls[0]; c.Err != "" || c.IsError || json.Unmarshal(c.Raw, &rich) != nil {
		t.Fatalf("rich.rich: %+v", c)
	}
	if got := canonJSON(t, rich.Content); got != richContent {
		t.Errorf("rich content:\n got %s\nwant %s", got, richContent)
	}
	if got := canonJSON(t, rich.Structured); got != `{"items":["a","b"],"sum":3}` {
		t.Errorf("rich structured content %s", got)
	}
	var pic struct {
		Content []struct {
			Type     string `json:"type"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
	}
	if c := r.Calls[1]; c.Err != "" || c.IsError || json.Unmarshal(c.Raw, &pic) != nil || len(pic.Content) != 2 {
		t.Fatalf("gosdk.picture: %+v", c)
	}
	if png, _ := base64.StdEncoding.DecodeString(pic.Content[1].Data); pic.Content[1].Type != "image" || pic.Content[1].MimeType != "image/png" || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Errorf("picture image block %+v", pic.Content[1])
	}
	if got := canonJSON(t, pic.Structured); got != `{"format":"png","height":1,"width":1}` {
		t.Errorf("picture structured content %s", got)
	}

	// Progress flows up to the client with its token; the cancellation
	// flows down to the server, whose own record says it stopped the call.
	slow := r.Calls[2]
	if slow.Err == "" || len(slow.Progress) != 2 || slow.Progress[0].Progress != 1 || slow.Progress[1].Message != "step 2" || slow.Progress[1].Total != 3 {
		t.Errorf("rich.slow: %+v", slow)
	}
	var seen []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if seen, _ = os.ReadFile(events); strings.Contains(string(seen), "cancelled") {
			break
		}
	}
	if !strings.Contains(string(seen), "started 2\ncancelled 2 the caller cancelled the call\n") || strings.Contains(string(seen), "abandoned") {
		t.Errorf("server-side record of the slow call: %q", seen)
	}
	for _, l := range strings.Fields(strings.ReplaceAll(readOr(pids), "server", "")) {
		if _, err := os.Stat("/proc/" + l); err == nil {
			t.Errorf("server %s still runs after the client left", l)
		}
	}
}

func readOr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func sameInode(t *testing.T, a, b string) bool {
	t.Helper()
	sa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(sa, sb)
}

// The projected tool itself, run directly: CLI prints text as text and a
// note for every other block; native frames carry the blocks and the
// structured content as they came.
func TestProjectedToolContent(t *testing.T) {
	bin := binaries(t)
	work := t.TempDir()
	root := filepath.Join(work, "root")
	os.MkdirAll(filepath.Join(root, "tool"), 0o755)
	cfg := filepath.Join(work, "mcp.json")
	writeFile(t, cfg, fmt.Sprintf(`{"mcpServers":{"rich":{"command":%q,"args":["rich"]}}}`, bin+"/server"), 0o644)
	projectAndInstall(t, bin, work, cfg, "rich", root, "rich", "fail")
	tool := filepath.Join(root, "tool", "rich.rich")

	// No bin/ctx in this tree: the projected tool links the artifact.
	if !sameInode(t, tool, bin+"/ctx") {
		t.Error("rich.rich is not a hard link of the ctx binary")
	}
	stdout, stderr, code := run(t, work, nil, tool)
	want := "rich result\n[image: image/png, 8 bytes]\n[audio: audio/wav, 12 bytes]\n" +
		"[resource: file:///notes.txt, text/plain, 11 bytes of text]\n[resource: file:///b.bin, application/octet-stream, 4 bytes]\n" +
		"[resource link: README (file:///README.md), text/markdown]\n" + `{"items":["a","b"],"sum":3}` + "\n"
	if code != 0 || stdout != want {
		t.Fatalf("CLI: exit %d\n%s\nwant\n%s%s", code, stdout, want, stderr)
	}
	stdout, _, code = run(t, work, []string{"CTX_TOOL_MODE=native", "CTX_RUN_ID=r9"}, tool)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 3 || lines[0] != `{"type":"start","run":"r9","tool":"rich.rich"}` || lines[2] != `{"type":"done","run":"r9","status":"ok"}` {
		t.Fatalf("native: exit %d\n%s", code, stdout)
	}
	var msg struct {
		Type       string          `json:"type"`
		Content    json.RawMessage `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal([]byte(lines[1]), &msg) != nil || msg.Type != "message" || canonJSON(t, msg.Content) != richContent || canonJSON(t, msg.Structured) != `{"items":["a","b"],"sum":3}` {
		t.Fatalf("native message frame %s", lines[1])
	}
	// isError: the message frame with the remote text, then EIO.
	stdout, _, code = run(t, work, []string{"CTX_TOOL_MODE=native", "CTX_RUN_ID=r9"}, filepath.Join(root, "tool", "rich.fail"))
	if code != 1 || stdout != `{"type":"start","run":"r9","tool":"rich.fail"}`+"\n"+
		`{"type":"message","run":"r9","role":"tool","content":[{"text":"remote failure: ","type":"text"}]}`+"\n"+
		`{"type":"error","run":"r9","code":"EIO","message":"remote failure: "}`+"\n"+
		`{"type":"done","run":"r9","status":"error"}`+"\n" {
		t.Fatalf("native isError: exit %d\n%s", code, stdout)
	}
}

// A policy change while a client is connected: ctxmcp serve announces
// tools/list_changed (the official SDK client sees it), the new listing
// lacks the revoked tool, and calling it anyway is a tool result with
// isError and the refusal, not a protocol error.
func TestServeListChangedAndRevoked(t *testing.T) {
	bin := binaries(t)
	work := t.TempDir()
	root := bootstrapRoot(t, bin, work)
	pol := filepath.Join(root, "agent", "coder.d", "policy")
	b, err := os.ReadFile(pol)
	if err != nil || !strings.Contains(string(b), "tool:fs.write execute") {
		t.Fatalf("coder's policy: %v\n%s", err, b)
	}
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "tool:fs.write ") {
			kept = append(kept, l)
		}
	}
	revoked := filepath.Join(work, "policy.revoked")
	writeFile(t, revoked, strings.Join(kept, "\n"), 0o644)
	// Served for coder from the host: from inside coder's sandbox, whose
	// workspace (ws) must not hold the tree.
	ws := filepath.Join(work, "ws")
	os.Mkdir(ws, 0o755)
	stdout, stderr, code := run(t, ws, nil, bin+"/client", "-then", "cp "+revoked+" "+pol, "-wait", "15s",
		"-after-call", `fs.write={"path":"/workspace/x","content":"y"}`,
		"--", bin+"/ctx", "ctxmcp", "serve", "--root", root, "--agent", "coder")
	r := fidelityResult(t, stdout, stderr, code)
	r.tool(t, "fs.write")
	if r.ListChanged != 1 {
		t.Fatalf("list_changed notifications seen: %d", r.ListChanged)
	}
	for _, n := range r.ToolsAfter {
		if n == "fs.write" {
			t.Fatalf("fs.write still listed after the revocation: %v", r.ToolsAfter)
		}
	}
	if len(r.AfterCalls) != 1 {
		t.Fatalf("after calls %+v", r.AfterCalls)
	}
	c := r.AfterCalls[0]
	if c.Err != "" || !c.IsError || len(c.Text) != 1 || !strings.HasPrefix(c.Text[0], "fs.write: EACCES: permission denied (agent-policy): ") {
		t.Fatalf("revoked call: %+v", c)
	}
	if _, err := os.Stat(filepath.Join(ws, "x")); err == nil {
		t.Fatal("the revoked call wrote its file")
	}
}

// TestServeSandboxedListingFollowsControls: a sandboxed server, which
// reuses its listing while nothing it read has changed, still tells the
// client of a tool's description written in place (one list_changed), and
// calls keep working. (mcpstdio's TestListingReuseFollowsFiles tests the
// reuse itself.)
func TestServeSandboxedListingFollowsControls(t *testing.T) {
	bin := binaries(t)
	work := t.TempDir()
	root := bootstrapRoot(t, bin, work)
	desc := filepath.Join(root, "tool", "fs.read.d", "description")
	ws := filepath.Join(work, "ws")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "notes"), "kept\n", 0o644)
	stdout, stderr, code := run(t, ws, nil, bin+"/client", "-then", "echo 'read a file, said again' >> "+desc, "-wait", "15s",
		"-after-call", `fs.read={"path":"notes"}`,
		"--", bin+"/ctx", "ctxmcp", "serve", "--root", root, "--agent", "coder")
	r := fidelityResult(t, stdout, stderr, code)
	if r.ListChanged != 1 {
		t.Fatalf("list_changed notifications seen after a description changed: %d", r.ListChanged)
	}
	if len(r.AfterCalls) != 1 || r.AfterCalls[0].IsError || len(r.AfterCalls[0].Text) != 1 || r.AfterCalls[0].Text[0] != "kept\n" {
		t.Fatalf("call after the change: %+v", r.AfterCalls)
	}
}

// Tools get their input as their input control declares: the JSON object
// as the only argument (the default), or on standard input; a tool whose
// cap says terminal is not offered.
func TestServeInputModes(t *testing.T) {
	bin := binaries(t)
	work := t.TempDir()
	root := filepath.Join(work, "root")
	tool := filepath.Join(root, "tool")
	script := "#!/bin/sh\nprintf 'argc=%s argv=%s stdin=%s\\n' \"$#\" \"$1\" \"$(cat)\"\n"
	writeFile(t, filepath.Join(tool, "byargv"), script, 0o755)
	writeFile(t, filepath.Join(tool, "bystdin"), script, 0o755)
	writeFile(t, filepath.Join(tool, "bystdin.d", "input"), "stdin\n", 0o644)
	writeFile(t, filepath.Join(tool, "badinput"), script, 0o755)
	writeFile(t, filepath.Join(tool, "badinput.d", "input"), "json\n", 0o644)
	writeFile(t, filepath.Join(tool, "console"), script, 0o755)
	writeFile(t, filepath.Join(tool, "console.d", "cap"), "terminal\n", 0o644)
	r := fidelityClient(t, bin, work, []string{"-call", `byargv={"a":1}`, "-call", `bystdin={"a":1}`, "-call", "console={}"}, "--root", root)
	var names []string
	for _, raw := range r.Tools {
		var lt listedTool
		json.Unmarshal(raw, &lt)
		names = append(names, lt.Name)
	}
	if fmt.Sprint(names) != "[byargv bystdin]" {
		t.Fatalf("tools %v (an invalid input control and a terminal tool are left out)", names)
	}
	want := []string{`argc=1 argv={"a":1} stdin=` + "\n", `argc=0 argv= stdin={"a":1}` + "\n", "console: ENOENT: console is a terminal tool (it takes a terminal, not a JSON object): not offered over MCP"}
	for i, w := range want {
		if c := r.Calls[i]; strings.Join(c.Text, "|") != w {
			t.Errorf("call %s: %+v, want %q", c.Name, c, w)
		}
	}
	if !r.Calls[2].IsError {
		t.Error("a terminal tool's call is not an error")
	}
}
