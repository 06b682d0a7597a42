package mcpstdio

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/fsops/proc"
	"ctx/policy/schema"
)

// PathTools serves the ctx tools found through a CTX_PATH: it lists them
// with their controls (description, schema, annotations, output.schema),
// and runs each call by executing the tool in native mode
// (CTX_TOOL_MODE=native), its input passed as its `input` control
// declares, and maps the tool's frames to the MCP result.
type PathTools struct {
	Dirs    []string                         // CTX_PATH directories, searched left to right
	Visible func(hit fsops.ToolHit) bool     // which tools may be listed and run
	Env     []string                         // the tools' environment (KEY=VALUE); see Call
	Timeout time.Duration                    // per call; default DefaultCallTimeout
	Warn    func(format string, args ...any) // reports tools left out of the listing, once each
	// Terminal reports the tools that are terminal-only by name (ctx's
	// bash, tmux, zellij, tsh, tsh.config): they take a terminal, not a
	// JSON object, and are never offered. A tool whose cap control lists
	// "terminal" is terminal-only too.
	Terminal func(name string) bool
	// Refusal explains why a tool found through Dirs is not Visible: the
	// refusing layer and the reason (the authority check's words). Nil, or
	// ok false: the tool is treated as unknown.
	Refusal func(hit fsops.ToolHit) (layer, reason string, ok bool)
	// RefusedByName explains a name not found through Dirs at all that
	// exists for the agent but was kept out of its view (a sandbox shows
	// only granted tools): the refusing layer and the words to say. Nil,
	// or ok false: the name is unknown.
	RefusedByName func(name string) (layer, reason string, ok bool)
	// Unoffered names tools that are found and visible but can never run
	// where this server runs (agent.create on the host, which needs an
	// agent's run host): they are not listed, and a call is answered with
	// why. Nil: every visible tool is offered.
	Unoffered func(name string) (why string, ok bool)
	// OnRefused, when set, records a call refused before any tool ran,
	// with its errno name and layer: every call leaves one event.
	OnRefused func(name, errno, layer, reason string)
	// Command, when set, says what to execute for a call of tool name
	// (its file, the argv and environment it would get; argv[0] is the
	// name): ctxmcp serve runs a call through the run host's broker this
	// way. Nil: the tool's file itself.
	Command func(name, file string, argv, env []string) (path string, args []string)
	// SelfSchema, when set, gives the input schema a tool without a schema
	// control described itself with (ctxmcp serve: the toolspec its run
	// host wrote at /mnt/tools/NAME.toolspec.json); nil for none.
	SelfSchema func(hit fsops.ToolHit) json.RawMessage

	wmu    sync.Mutex
	warned map[string]bool
}

// Refused records a call of a name that is not served at all (Refuser).
func (p *PathTools) Refused(name, reason string) {
	if p.OnRefused != nil {
		p.OnRefused(name, "ENOENT", "mount-visibility", reason)
	}
}

// Limits of a served tool call.
const (
	DefaultCallTimeout = 120 * time.Second
	MaxCallOutput      = 1 << 20 // per stream in CLI output; the rest is read and dropped
	// MaxNativeOutput bounds a native-mode tool's standard output: its
	// frames may carry the blocks of a 1 MiB MCP result (an image) and
	// their JSON escaping.
	MaxNativeOutput = 4 << 20
	// CancelGrace is how long a cancelled or timed-out tool has between
	// SIGTERM and SIGKILL: a projected tool uses it to tell its MCP server
	// (notifications/cancelled) and end it.
	CancelGrace = time.Second
)

// ProgressEnv is set to 1 in a served tool's environment when the client
// asked for progress: a tool that can report it then writes progress
// frames ({"type":"progress","run":R,"progress":N,"total":T,"message":M}),
// which Call relays as they come.
const ProgressEnv = "CTX_TOOL_PROGRESS"

func (p *PathTools) warn(format string, args ...any) {
	if p.Warn == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.warned == nil {
		p.warned = map[string]bool{}
	}
	if p.warned[msg] {
		return // Tools runs before every call and on every poll
	}
	p.warned[msg] = true
	p.Warn("%s", msg)
}

// terminalOnly reports whether a tool takes a terminal instead of a JSON
// object (see PathTools.Terminal).
func (p *PathTools) terminalOnly(name string, caps []byte) bool {
	if p.Terminal != nil && p.Terminal(name) {
		return true
	}
	for _, l := range strings.Split(string(caps), "\n") {
		if strings.TrimSpace(l) == "terminal" {
			return true
		}
	}
	return false
}

func (p *PathTools) unoffered(name string) (string, bool) {
	if p.Unoffered == nil {
		return "", false
	}
	return p.Unoffered(name)
}

// toolControls are the controls a served tool's description comes from.
var toolControls = []string{"description", "schema", "annotations", "output.schema", "input", "cap"}

// Tools lists the visible tools that can be called with a JSON object:
// terminal-only tools are left out, and so is a tool whose schema control
// does not compile or does not describe an object (MCP requires one), or
// whose input control is invalid. A tool without a schema control takes
// any object. An invalid annotations or output.schema control only drops
// that part of the description (absent hints are MCP's cautious
// defaults). Each tool left out is warned about once.
func (p *PathTools) Tools() ([]ServedTool, error) {
	hits, _ := fsops.ListTools(p.Dirs)
	var out []ServedTool
	for _, h := range hits {
		if p.Visible != nil && !p.Visible(h) {
			continue
		}
		if why, ok := p.unoffered(h.Name); ok {
			p.warn("leaving out %s: %s", h.Name, why)
			continue
		}
		t, ok := p.describe(h)
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// describe reads a tool's controls into its MCP description.
func (p *PathTools) describe(h fsops.ToolHit) (ServedTool, bool) {
	ctl, err := fsops.ReadControls(h.ControlDir, toolControls)
	if err != nil {
		p.warn("leaving out %s: %v", h.Name, err)
		return ServedTool{}, false
	}
	if p.terminalOnly(h.Name, ctl["cap"]) {
		return ServedTool{}, false // by design, not worth a warning
	}
	t := ServedTool{Name: h.Name, Description: strings.TrimSpace(string(ctl["description"])),
		InputSchema: json.RawMessage(`{"type":"object"}`), Input: object.InputArgv}
	if s, ok := ctl["schema"]; ok {
		if err := objectSchema(s); err != nil {
			p.warn("leaving out %s: schema control: %v", h.Name, err)
			return ServedTool{}, false
		}
		t.InputSchema = compactJSON(s)
	} else if p.SelfSchema != nil {
		if s := p.SelfSchema(h); s != nil && objectSchema(s) == nil {
			t.InputSchema = compactJSON(s)
		}
	}
	if s, ok := ctl["input"]; ok {
		if t.Input, err = object.ParseInput(s); err != nil {
			p.warn("leaving out %s: %s: %v", h.Name, filepath.Join(h.ControlDir, "input"), err)
			return ServedTool{}, false
		}
	}
	if s, ok := ctl["annotations"]; ok {
		if a, err := object.ParseAnnotations(s); err != nil {
			p.warn("%s: no annotations served: %s: %v", h.Name, filepath.Join(h.ControlDir, "annotations"), err)
		} else if !a.IsZero() {
			t.Annotations = json.RawMessage(a.JSON())
			t.Title = a.Title
		}
	}
	if s, ok := ctl["output.schema"]; ok {
		if err := object.ValidateControl("tool", "output.schema", s); err != nil {
			p.warn("%s: no outputSchema served: %s: %v", h.Name, filepath.Join(h.ControlDir, "output.schema"), err)
		} else {
			t.OutputSchema = compactJSON(s)
		}
	}
	return t, true
}

func compactJSON(s []byte) json.RawMessage {
	var b bytes.Buffer
	_ = json.Compact(&b, s)
	return b.Bytes()
}

func objectSchema(s []byte) error {
	if _, err := schema.Compile(s); err != nil {
		return err
	}
	var probe struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(s, &probe) != nil || string(probe.Type) != `"object"` {
		return fmt.Errorf(`type is not "object"`)
	}
	return nil
}

// Unlisted accounts for a call of a tool not in the listing (Unlister): a
// terminal-only tool, or one found through Dirs that the caller may not
// (or no longer) run, gets isError with the reason, and a tool listed
// earlier that is gone gets isError saying so; each is recorded as
// refused. Anything else is unknown.
func (p *PathTools) Unlisted(name string, listedBefore bool) (ToolResult, bool) {
	refuse := func(errno, layer, msg string) (ToolResult, bool) {
		if p.OnRefused != nil {
			p.OnRefused(name, errno, layer, "ctxmcp serve: "+msg)
		}
		return ToolResult{Content: []json.RawMessage{TextBlock(name + ": " + errno + ": " + msg)}, IsError: true}, true
	}
	hit, err := fsops.LookupTool(p.Dirs, name)
	if err != nil {
		if p.RefusedByName != nil {
			if layer, reason, ok := p.RefusedByName(name); ok {
				return refuse("EACCES", layer, reason)
			}
		}
		if listedBefore {
			return refuse("ENOENT", "mount-visibility", "tool "+name+" is no longer available")
		}
		return ToolResult{}, false
	}
	if why, ok := p.unoffered(name); ok {
		return refuse("ENOENT", "mount-visibility", why)
	}
	caps, _ := fsops.ReadControl(filepath.Join(hit.ControlDir, "cap"))
	if p.terminalOnly(name, caps) {
		return refuse("ENOENT", "mount-visibility", name+" is a terminal tool (it takes a terminal, not a JSON object): not offered over MCP")
	}
	if p.Visible != nil && !p.Visible(hit) && p.Refusal != nil {
		if layer, reason, ok := p.Refusal(hit); ok {
			return refuse("EACCES", layer, "permission denied ("+layer+"): "+reason)
		}
	}
	if listedBefore {
		return refuse("ENOENT", "mount-visibility", "tool "+name+" is no longer offered")
	}
	return ToolResult{}, false
}

// Call runs the tool found again through the CTX_PATH (so a tool removed
// since listing is not run) in its own process group, with p.Env plus
// CTX_TOOL_MODE=native, CTX_AUTHORIZED_OBJECT=<its path>, a fresh
// CTX_RUN_ID unless p.Env has one, and CTX_TOOL_PROGRESS=1 when progress
// is wanted. Its input goes as its input control declares: argv [NAME,
// ARGUMENTS-JSON] with stdin from /dev/null, or argv [NAME] with the JSON
// on stdin. Its output is mapped by toolResult. The tool and everything it
// started end with the call; on timeout or cancellation they get SIGTERM
// and CancelGrace first.
func (p *PathTools) Call(ctx context.Context, tool ServedTool, args json.RawMessage, progress func(Progress)) (ToolResult, error) {
	hit, err := fsops.LookupTool(p.Dirs, tool.Name)
	if err != nil || (p.Visible != nil && !p.Visible(hit)) {
		return ToolResult{Content: []json.RawMessage{TextBlock("tool " + tool.Name + " is no longer available")}, IsError: true}, nil
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	env := append([]string{}, p.Env...)
	env = setEnv(env, "CTX_TOOL_MODE", "native")
	env = setEnv(env, "CTX_AUTHORIZED_OBJECT", hit.Path)
	if progress != nil {
		env = setEnv(env, ProgressEnv, "1")
	}
	if !hasEnv(env, "CTX_RUN_ID") {
		env = append(env, "CTX_RUN_ID="+fsops.NewRunID())
	}
	argv := []string{tool.Name, string(args)}
	var stdin []byte
	if tool.Input == object.InputStdin {
		argv, stdin = []string{tool.Name}, args
	}
	var onLine func([]byte)
	if progress != nil {
		onLine = func(line []byte) {
			if pr, ok := parseProgressFrame(line); ok {
				progress(pr)
			}
		}
	}
	path := hit.Path
	if p.Command != nil {
		path, argv = p.Command(tool.Name, hit.Path, argv, env)
	}
	run, err := runBounded(ctx, path, argv, env, stdin, timeout, MaxNativeOutput, onLine)
	if err != nil {
		return ToolResult{Content: []json.RawMessage{TextBlock(fmt.Sprintf("%s: %v", tool.Name, err))}, IsError: true}, nil
	}
	return toolResult(tool.Name, run), nil
}

func setEnv(env []string, k, v string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

func hasEnv(env []string, k string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			return true
		}
	}
	return false
}

// truncated is what a bounded stream kept, with a marker line when some
// of it was dropped.
func truncated(b *proc.Capped) string {
	if b.Truncated() {
		return string(b.Bytes()) + fmt.Sprintf("\n[truncated: %d more bytes]\n", b.Dropped())
	}
	return string(b.Bytes())
}

// runResult is what a bounded run left: its output streams, how much of
// its standard output was dropped, and its exit status (128+N for a
// signal).
type runResult struct {
	stdout, stderr *proc.Capped
	status         int
}

// runBounded runs path with argv as a tree that ends whole with the call
// (proc.StartTree), stdin from the given bytes (nil: /dev/null), keeps at
// most outMax bytes of standard output (onLine sees each line of it as it
// comes) and MaxCallOutput of standard error, and stops the tree on
// timeout or cancellation (SIGTERM, CancelGrace, SIGKILL).
func runBounded(ctx context.Context, path string, argv, env []string, stdin []byte, timeout time.Duration, outMax int, onLine func([]byte)) (*runResult, error) {
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	} else {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		defer devnull.Close()
		in = devnull
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: in, Stdout: outW, Stderr: errW}
	tree, err := proc.StartTree(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("cannot run %s: %v", filepath.Base(path), err)
	}
	res := &runResult{stdout: &proc.Capped{Limit: outMax, OnLine: onLine}, stderr: &proc.Capped{Limit: MaxCallOutput}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(res.stdout, outR) }()
	go func() { defer wg.Done(); _, _ = io.Copy(res.stderr, errR) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var killed error
	grace := DefaultKillGrace
	select {
	case <-tree.Exited():
	case <-timer.C:
		killed, grace = fmt.Errorf("timed out after %v", timeout), CancelGrace
	case <-ctx.Done():
		killed, grace = fmt.Errorf("cancelled"), CancelGrace
	}
	// The tool's tree is ended in every case, so nothing it started
	// outlives the call: its group gets SIGTERM and a grace period, then
	// SIGKILL, and so does everything that left the group.
	tree.Stop(grace)
	_ = tree.Wait()
	// Every writer is dead unless one got out of reach; read what is left
	// in the pipes, and only then close them to unblock the copies.
	copied := make(chan struct{})
	go func() { wg.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	outR.Close()
	errR.Close()
	<-copied
	if killed != nil {
		return nil, killed
	}
	res.status = proc.ExitCode(cmd.ProcessState)
	return res, nil
}
