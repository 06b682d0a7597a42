package mcpstdio

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/policy/schema"
)

// PathTools serves the ctx tools found through a CTX_PATH: it lists them
// with their controls (description, schema, annotations, output.schema),
// and runs each call by executing the tool in native mode
// (CTX_TOOL_MODE=native), its input passed as its `input` control
// declares, and maps the tool's frames to the MCP result.
type PathTools struct {
	Dirs []string // CTX_PATH directories, searched left to right
	// Visibility returns which tools may be listed and run, decided on the
	// tree as it is now: it is asked once per listing and per call, and
	// the function it returns once per tool, so what every tool's
	// decision shares (the caller, its trust, its view) is read once.
	// Nil: every tool is visible.
	Visibility func() func(hit fsops.ToolHit) bool
	Env        []string                         // the tools' environment (KEY=VALUE); see Call
	Timeout    time.Duration                    // per call; default DefaultCallTimeout
	Warn       func(format string, args ...any) // reports tools left out of the listing, once each
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
	// Run, when set, runs a call in this process instead of starting a
	// program for it: ctxmcp serve in a sandbox asks the run host's broker
	// itself, which spares a process start per call. It gets the argv and
	// environment the program would (argv[0] is the name), stdin (nil:
	// none), writes the tool's output to stdout and stderr, and returns
	// the exit status; handled false falls back to a program (Command).
	// Call bounds and collects the output as for a program, and ctx ends
	// at the call's timeout or cancellation.
	Run func(ctx context.Context, argv, env []string, stdin []byte, stdout, stderr io.Writer) (status int, handled bool)
	// SelfSchema, when set, gives the input schema a tool without a schema
	// control described itself with (ctxmcp serve: the toolspec its run
	// host wrote at /mnt/tools/NAME.toolspec.json); nil for none.
	SelfSchema func(hit fsops.ToolHit) json.RawMessage
	// Revision, when set, lets Tools reuse its last listing: it returns a
	// key of what visibility depends on beyond the tools' own files
	// (ctxmcp serve in a sandbox: the run's policy account, which the run
	// host rewrites whenever a policy it is computed from changes). The
	// listing is reused while that key, the directories searched and every
	// tool's file, control directory and controls are unchanged (inode,
	// size, mode, modification and change times; a rewrite in place to
	// the same size within one tick of the kernel's file clock goes unseen
	// until the next change). Serve lists before each call; a call's own
	// decision stays the run host's. Where the kernel can watch them
	// (inotify), the directories searched and the tools' control
	// directories are watched instead of stat'ed: while no change to them
	// is queued and the key is unchanged, the last listing is returned
	// as is (pathtools_watch.go).
	Revision func() string

	listMu     sync.Mutex
	listKey    string
	listCached []ServedTool
	watch      listingWatch

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
	rev, key, gen := "", "", uint64(0)
	var hits []fsops.ToolHit
	if p.Revision != nil {
		rev = p.Revision()
		cached, g, ok := p.unchangedListing(rev)
		if ok {
			return cached, nil
		}
		gen = g
		hits, _ = fsops.ListTools(p.Dirs)
		p.watchListing(hits) // before anything of the listing is read
		key = rev + "\n" + p.filesKey(hits)
		p.listMu.Lock()
		cached, ok = p.listCached, p.listKey == key
		if ok {
			p.watch.listed(rev, gen)
		}
		p.listMu.Unlock()
		if ok {
			return cached, nil
		}
	} else {
		hits, _ = fsops.ListTools(p.Dirs)
	}
	visible := p.visible()
	var out []ServedTool
	for _, h := range hits {
		if !visible(h) {
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
	if p.Revision != nil {
		p.listMu.Lock()
		if gen >= p.watch.listedGen {
			// Not over a reading made after a later change.
			p.listKey, p.listCached = key, out
			p.watch.listed(rev, gen)
		}
		p.listMu.Unlock()
	}
	return out, nil
}

// filesKey is the state of what a listing read: the directories searched,
// and each tool's file, control directory and controls, by inode, size,
// mode, modification and change times ("-" for a missing one).
func (p *PathTools) filesKey(hits []fsops.ToolHit) string {
	var b strings.Builder
	stat := func(path string) {
		fi, err := os.Lstat(path)
		if err != nil {
			b.WriteString("-;")
			return
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st == nil {
			st = &syscall.Stat_t{}
		}
		fmt.Fprintf(&b, "%d:%d:%o:%d:%d;", st.Ino, fi.Size(), fi.Mode(), fi.ModTime().UnixNano(), st.Ctim.Nano())
	}
	for _, d := range p.Dirs {
		stat(d)
	}
	for _, h := range hits {
		stat(h.Path)
		stat(h.ControlDir)
		for _, c := range toolControls {
			stat(filepath.Join(h.ControlDir, c))
		}
		stat(filepath.Join(h.ControlDir, "policy"))
	}
	return b.String()
}

// visible is Visibility's decider for now; every tool when it is nil.
func (p *PathTools) visible() func(hit fsops.ToolHit) bool {
	if p.Visibility == nil {
		return func(fsops.ToolHit) bool { return true }
	}
	return p.Visibility()
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
	if !p.visible()(hit) && p.Refusal != nil {
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
// since listing is not run; Serve lists, deciding visibility, right before
// each call, and inside a run the run host decides the call itself) in its
// own process group, with p.Env plus
// CTX_TOOL_MODE=native, CTX_AUTHORIZED_OBJECT=<its path>, a fresh
// CTX_RUN_ID unless p.Env has one, and CTX_TOOL_PROGRESS=1 when progress
// is wanted. Its input goes as its input control declares: argv [NAME,
// ARGUMENTS-JSON] with stdin from /dev/null, or argv [NAME] with the JSON
// on stdin. Its output is mapped by toolResult. The tool and everything it
// started end with the call; on timeout or cancellation they get SIGTERM
// and CancelGrace first.
func (p *PathTools) Call(ctx context.Context, tool ServedTool, args json.RawMessage, progress func(Progress)) (ToolResult, error) {
	hit, err := fsops.LookupTool(p.Dirs, tool.Name)
	if err != nil {
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
	run, handled, err := p.runInProcess(ctx, argv, env, stdin, timeout, onLine)
	if !handled {
		path := hit.Path
		if p.Command != nil {
			path, argv = p.Command(tool.Name, hit.Path, argv, env)
		}
		run, err = runBounded(ctx, path, argv, env, stdin, timeout, MaxNativeOutput, onLine)
	}
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
