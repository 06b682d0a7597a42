package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"

	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/mcpstdio"
	"ctx/policy"
)

// ProjectedToolApplet returns the applet that runs an installed tool whose
// executable is this binary under a name that is not an applet (an
// MCP-projected tool such as github.search_issues): it applies when
// NAME.d/mcp exists beside the executable. The executable's directory is
// the directory of CTX_AUTHORIZED_OBJECT when that is set, absolute and
// names this tool; else the directory of argv[0] when it holds a slash;
// else that of /proc/self/exe.
func ProjectedToolApplet(e *cli.Env, name string) (cli.Applet, bool) {
	ctl, loc, ok := projectedControls(e, name)
	if !ok {
		return cli.Applet{}, false
	}
	run := func(e *cli.Env, args []string) int { return runProjectedTool(e, ctl, loc, args) }
	// Hidden: the dispatcher's --help is for applets with manual pages;
	// this tool answers --help itself.
	return cli.Applet{Name: name, Run: run, Hidden: true}, true
}

// ProjectedTool is the tool ProjectedToolApplet runs, for a tool worker
// to run its call itself (toolrun.Execute).
func ProjectedTool(e *cli.Env, name string) (*toolrun.BuiltinTool, bool) {
	ctl, loc, ok := projectedControls(e, name)
	if !ok {
		return nil, false
	}
	return projectedTool(name, ctl, loc), true
}

// projectedControls are the control directory and the locator of the
// projected tool name, found beside its executable.
func projectedControls(e *cli.Env, name string) (ctl string, loc []byte, ok bool) {
	if policy.ValidName(name) != nil {
		return "", nil, false
	}
	dir, ok := executableDir(e, name)
	if !ok {
		return "", nil, false
	}
	ctl = filepath.Join(dir, name+".d")
	loc, err := fsops.ReadControl(filepath.Join(ctl, "mcp"))
	if err != nil {
		return "", nil, false
	}
	return ctl, loc, true
}

// projectedTool is the tool of one projected tool: the one runner around
// the remote call (projectedCall.run).
func projectedTool(name, ctl string, loc []byte) *toolrun.BuiltinTool {
	p := projectedCall{name: name, ctl: ctl, loc: loc}
	return &toolrun.BuiltinTool{Name: name, Ctl: ctl, CLI: projectedArgs, NoTerminalInput: true, ErrnoInLines: true, Run: p.run}
}

func executableDir(e *cli.Env, name string) (string, bool) {
	if obj := e.Getenv("CTX_AUTHORIZED_OBJECT"); obj != "" && filepath.IsAbs(obj) {
		if filepath.Base(obj) != name {
			return "", false // authorized for another object: not us
		}
		return filepath.Dir(filepath.Clean(obj)), true
	}
	if strings.Contains(e.Argv0, "/") {
		abs, err := filepath.Abs(e.Argv0)
		return filepath.Dir(abs), err == nil
	}
	self, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return "", false
	}
	return filepath.Dir(self), true
}

// runProjectedTool runs an MCP-projected tool: its --help and
// --agentrc-schema here, every call through the one runner (runTool) with
// the remote call as its Run.
func runProjectedTool(e *cli.Env, ctl string, locData []byte, args []string) int {
	name := e.Name
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		desc, _ := fsops.ReadControl(filepath.Join(ctl, "description"))
		fmt.Fprintf(e.Stdout, "%s - %s\n\nMCP tool projected by ctxmcp. Input: one JSON object, as the only\nargument or on standard input. See `ctx man ctx.mcp`.\n",
			name, cli.Escape(strings.TrimSpace(string(desc))))
		return cli.OK
	}
	if len(args) == 1 && args[0] == "--agentrc-schema" {
		s, err := fsops.ReadControl(filepath.Join(ctl, "schema"))
		if err != nil {
			return cli.Fail(e, cli.Unavailable, "schema control: %v", err)
		}
		e.Stdout.Write(toolrun.ToolSpec(name, ctl, s)) // arguments and output, as its toolspec
		return cli.OK
	}
	return toolrun.RunTool(e, projectedTool(name, ctl, locData), args)
}

// projectedArgs is a projected tool's answer to input that is not one JSON
// object: none at all (empty stdin) is {}; arguments are bad input.
func projectedArgs(args []string, _ io.Reader) (map[string]any, error) {
	switch {
	case args == nil:
		return map[string]any{}, nil
	case len(args) == 1:
		return nil, toolrun.InputErr("input is not a JSON object")
	}
	return nil, toolrun.InputErr("input must be one JSON object argument, or JSON on standard input")
}

// projectedCall is the Run of an MCP-projected tool: the tools/call of its
// server, found through the locator control.
type projectedCall struct {
	name, ctl string
	loc       []byte
}

func (p projectedCall) run(c *toolrun.ToolCall) error {
	loc, err := object.ParseLocator(p.loc)
	if err != nil {
		return toolrun.ToolErr(syscall.EIO, cli.Unavailable, "%s/mcp: %v", p.ctl, err)
	}
	srv, err := lockedServer(loc, p.name, p.ctl)
	if err != nil {
		return toolrun.ToolErr(syscall.EIO, cli.Unavailable, "%v", err)
	}
	input := c.RawInput
	if input == nil {
		input, _ = json.Marshal(c.Input)
	}
	// SIGINT, SIGTERM or SIGHUP (a person's ^C, ctxmcp serve cancelling
	// the call its client cancelled, a timeout) cancels the remote call:
	// the server is sent notifications/cancelled for it before it is
	// ended, so the server-side work stops, not just our wait.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var caught os.Signal
	go func() {
		select {
		case caught = <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	var onProgress func(mcpstdio.Progress)
	if c.Native && c.Env.Getenv(mcpstdio.ProgressEnv) == "1" {
		onProgress = c.Frames.Progress
	}
	var res *mcpstdio.CallResult
	if kc := warmKeeper(ctx, c.Env, loc, srv); kc != nil {
		// Inside a run: the run's live session of the server (WARM
		// SERVERS in ctx man ctxmcp).
		res, err = kc.Call(ctx, loc.Tool, input, onProgress)
		kc.Close()
	} else if ctx.Err() != nil {
		err = mcpstdio.ErrCancelled // while it waited for the keeper
	} else {
		cl, serr := mcpstdio.Start(loc.Server, srv, mcpstdio.Options{})
		if serr != nil {
			return toolrun.ToolErr(syscall.EIO, cli.Unavailable, "%v", serr)
		}
		res, err = cl.CallToolContext(ctx, loc.Tool, input, onProgress)
		cl.Close()
	}
	if errors.Is(err, mcpstdio.ErrCancelled) {
		code := cli.Failure
		if sig, ok := caught.(syscall.Signal); ok {
			code = cli.Signaled(sig)
		}
		return toolrun.ToolErr(syscall.ECANCELED, code, "cancelled: the server was told to stop the call")
	}
	if err != nil {
		return toolrun.ToolErr(syscall.EIO, cli.Unavailable, "%v", err)
	}
	return projectedResult(c, res)
}

// lockedServer reads the locator's config and returns the named server.
// With a sha256 in the locator the server's entry must still be the one
// projected: its EntryDigest (only the entry counts, so reformatting the
// file or editing another server leaves the tool working), or, for a
// locator projected before entry digests, the digest of the whole file.
// A stale locator's error says how to project the tool again.
func lockedServer(loc object.Locator, name, ctl string) (mcpstdio.ServerConfig, error) {
	data, err := fsops.ReadRegular(loc.Config, mcpstdio.MaxConfigSize)
	if errors.Is(err, fs.ErrNotExist) {
		// Most often the config is on the host but not in the sandbox
		// the call runs in: only the workspace, the tree and mounts are.
		return mcpstdio.ServerConfig{}, fmt.Errorf("config: %v; a sandbox sees only its workspace (/workspace), /ctx and its mounts: project the tool with --runtime-config a path it sees (ctxmcp project --runtime-config /workspace/mcp.json ...), or mount the config's directory (agent start --mount DIR DIR ro, or the agent's mount control)", err)
	}
	if err != nil {
		return mcpstdio.ServerConfig{}, fmt.Errorf("config: %v", err)
	}
	cfg, err := mcpstdio.ParseConfig(data)
	if err != nil {
		return mcpstdio.ServerConfig{}, fmt.Errorf("config %s: %v", loc.Config, err)
	}
	srv, ok := cfg.Servers[loc.Server]
	if !ok {
		return mcpstdio.ServerConfig{}, fmt.Errorf("config %s has no server %q; %s", loc.Config, loc.Server, reprojectHint(loc, name, ctl))
	}
	if loc.SHA256 == "" {
		return srv, nil
	}
	if got := mcpstdio.EntryDigest(srv); got != loc.SHA256 {
		if whole := sha256.Sum256(data); hex.EncodeToString(whole[:]) == loc.SHA256 {
			return srv, nil
		}
		return mcpstdio.ServerConfig{}, fmt.Errorf("config %s: server %q changed since projection (entry sha256 %s, locator says %s); %s",
			loc.Config, loc.Server, got, loc.SHA256, reprojectHint(loc, name, ctl))
	}
	return srv, nil
}

// reprojectHint is the command line that projects the tool again and
// replaces the installed one: installed objects are never overwritten, so
// it uninstalls and installs. The root and tier come from where the tool
// is (ROOT/tool is the system tier, ROOT/home/UID/tool the user tier).
func reprojectHint(loc object.Locator, name, ctl string) string {
	dir := filepath.Dir(ctl)
	root, tier := filepath.Dir(dir), "system"
	if up := filepath.Dir(root); filepath.Base(up) == "home" {
		if _, err := strconv.Atoi(filepath.Base(root)); err == nil {
			root, tier = filepath.Dir(up), "user"
		}
	}
	const out = "DIR" // a new directory of the caller's choosing
	return fmt.Sprintf("re-project it: ctxmcp project --config %s --runtime-config %s --server %s --out %s && ctx object uninstall --root %s --tier %s tool %s --yes && ctx object install --root %s --tier %s %s/%s.manifest.json",
		loc.Config, loc.Config, loc.Server, out, root, tier, name, root, tier, out, name)
}

// projectedResult maps tools/call to output.
//
// Native: one message frame with the content blocks as the server sent
// them (text, image, audio, resource, resource_link) and its
// structuredContent; then done ok, or, for isError, an EIO error frame
// with the remote text and done error (exit 1): the message frame comes
// first either way, so nothing the server said is lost.
//
// CLI: text blocks as text (a newline added when missing), a one-line
// note for every other block (contentNote), and structuredContent as one
// JSON line unless a text block already holds the same JSON value. For
// isError the same goes to standard error, then `NAME: EIO: TEXT`.
func projectedResult(c *toolrun.ToolCall, res *mcpstdio.CallResult) error {
	var texts []string
	for _, b := range res.Content {
		if t, ok := textOf(b); ok {
			texts = append(texts, t)
		}
	}
	errMsg := strings.Join(texts, "\n")
	if errMsg == "" {
		errMsg = "remote MCP tool returned an error"
	}
	if c.Native {
		if len(res.Content) > 0 || res.Structured != nil {
			c.Frames.Content(res.Content, compactRaw(res.Structured))
		}
	} else {
		w := c.Out
		if res.IsError {
			w = c.Env.Stderr
		}
		for _, b := range res.Content {
			if t, ok := textOf(b); ok {
				if !res.IsError { // else the EIO line carries the text
					io.WriteString(w, t)
					if !strings.HasSuffix(t, "\n") {
						io.WriteString(w, "\n")
					}
				}
				continue
			}
			io.WriteString(w, cli.Escape(contentNote(b))+"\n")
		}
		if res.Structured != nil && !sameJSONAsAny(res.Structured, texts) {
			w.Write(append(compactRaw(res.Structured), '\n'))
		}
	}
	if res.IsError {
		return toolrun.ToolErr(syscall.EIO, cli.Failure, "%s", errMsg)
	}
	return nil
}

// textOf returns the text of a text content block.
func textOf(b json.RawMessage) (string, bool) {
	var blk struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	_ = json.Unmarshal(b, &blk)
	if blk.Type == "text" && blk.Text != nil {
		return *blk.Text, true
	}
	return "", false
}

func compactRaw(v json.RawMessage) json.RawMessage {
	if v == nil {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return v
	}
	return b.Bytes()
}

// contentNote is the one line CLI mode prints for a content block that is
// not text, naming what it is instead of dumping it:
//
//	[image: image/png, 1234 bytes]
//	[audio: audio/wav, 5678 bytes]
//	[resource: file:///a.txt, text/plain, 12 bytes of text]
//	[resource: file:///b.bin, application/octet-stream, 99 bytes]
//	[resource link: README (file:///README.md), text/markdown]
//	[block of type "x"]
//
// Sizes are of the decoded data (base64 that does not decode is counted
// as sent). Native mode, and ctxmcp serve, carry the blocks themselves.
func contentNote(b json.RawMessage) string {
	var blk struct {
		Type     string `json:"type"`
		Data     string `json:"data"`
		MimeType string `json:"mimeType"`
		URI      string `json:"uri"`
		Name     string `json:"name"`
		Resource *struct {
			URI      string  `json:"uri"`
			MimeType string  `json:"mimeType"`
			Text     *string `json:"text"`
			Blob     string  `json:"blob"`
		} `json:"resource"`
	}
	_ = json.Unmarshal(b, &blk)
	size := func(b64 string) int {
		if d, err := base64.StdEncoding.DecodeString(b64); err == nil {
			return len(d)
		}
		return len(b64)
	}
	join := func(parts ...string) string {
		var kept []string
		for _, p := range parts {
			if p != "" {
				kept = append(kept, p)
			}
		}
		return strings.Join(kept, ", ")
	}
	switch blk.Type {
	case "image", "audio":
		return fmt.Sprintf("[%s: %s]", blk.Type, join(blk.MimeType, fmt.Sprintf("%d bytes", size(blk.Data))))
	case "resource":
		if r := blk.Resource; r != nil {
			if r.Text != nil {
				return fmt.Sprintf("[resource: %s]", join(r.URI, r.MimeType, fmt.Sprintf("%d bytes of text", len(*r.Text))))
			}
			return fmt.Sprintf("[resource: %s]", join(r.URI, r.MimeType, fmt.Sprintf("%d bytes", size(r.Blob))))
		}
		return "[resource]"
	case "resource_link":
		name := blk.Name
		if blk.URI != "" {
			name = join(name, "") + " (" + blk.URI + ")"
		}
		return fmt.Sprintf("[resource link: %s]", join(strings.TrimSpace(name), blk.MimeType))
	}
	return fmt.Sprintf("[block of type %q]", blk.Type)
}

// sameJSONAsAny reports whether some text holds the same JSON value as v.
func sameJSONAsAny(v json.RawMessage, texts []string) bool {
	var want any
	if json.Unmarshal(v, &want) != nil {
		return false
	}
	for _, t := range texts {
		var got any
		if json.Unmarshal([]byte(t), &got) == nil && reflect.DeepEqual(got, want) {
			return true
		}
	}
	return false
}
