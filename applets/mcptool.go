package applets

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
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/mcpstdio"
	"ctx/policy"
	"ctx/policy/schema"
	"ctx/ptyterm"

	"golang.org/x/sys/unix"
)

// projectedToolApplet returns the applet that runs an installed tool whose
// executable is this binary under a name that is not an applet (an
// MCP-projected tool such as github.search_issues): it applies when
// NAME.d/mcp exists beside the executable. The executable's directory is
// the directory of CTX_AUTHORIZED_OBJECT when that is set, absolute and
// names this tool; else the directory of argv[0] when it holds a slash;
// else that of /proc/self/exe.
func projectedToolApplet(e *Env, name string) (Applet, bool) {
	if policy.ValidName(name) != nil {
		return Applet{}, false
	}
	dir, ok := executableDir(e, name)
	if !ok {
		return Applet{}, false
	}
	ctl := filepath.Join(dir, name+".d")
	loc, err := fsops.ReadControl(filepath.Join(ctl, "mcp"))
	if err != nil {
		return Applet{}, false
	}
	run := func(e *Env, args []string) int { return runProjectedTool(e, ctl, loc, args) }
	// Hidden: the dispatcher's --help is for applets with manual pages;
	// this tool answers --help itself.
	return Applet{Name: name, Run: run, Hidden: true}, true
}

func executableDir(e *Env, name string) (string, bool) {
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

// toolOutput writes a tool's results in CLI or native (JSONL frames) mode.
type toolOutput struct {
	e      *Env
	name   string
	native bool
	run    string
	ctl    string // the tool's control directory
	errno  string // of the failure reported, for the event
	layer  string // the authority layer that refused, for the event
}

// toolFrame is one JSONL frame of native mode; fields in ABI order. A
// projected tool's message frame carries the remote content blocks as they
// came and the remote structuredContent; progress frames (only when
// CTX_TOOL_PROGRESS=1 asks for them) carry progress, total and message.
type toolFrame struct {
	Type       string            `json:"type"`
	Run        string            `json:"run"`
	Tool       string            `json:"tool,omitempty"`
	Role       string            `json:"role,omitempty"`
	Content    []json.RawMessage `json:"content,omitempty"`
	Structured json.RawMessage   `json:"structuredContent,omitempty"`
	Code       string            `json:"code,omitempty"`
	Message    string            `json:"message,omitempty"`
	Status     string            `json:"status,omitempty"`
	Progress   *float64          `json:"progress,omitempty"`
	Total      *float64          `json:"total,omitempty"`
}

func (o *toolOutput) frame(f toolFrame) {
	f.Run = o.run
	b, _ := json.Marshal(f)
	o.e.Stdout.Write(append(b, '\n'))
}

func (o *toolOutput) start() {
	if o.native {
		o.frame(toolFrame{Type: "start", Tool: o.name})
	}
}

// record appends the call's tool.call event (see recordToolEvent).
func (o *toolOutput) record(began time.Time, code int) {
	ev := fsops.Event{Type: "tool.call", Object: "tool/" + o.name, Status: "ok", Exit: &code,
		DurMS: float64(time.Since(began).Microseconds()) / 1000}
	if code != exitOK {
		ev.Status, ev.Errno = "error", o.errno
		switch {
		case o.layer != "":
			ev.Status, ev.Layer = "denied", o.layer
		case o.errno == "ECANCELED":
			ev.Status = "cancelled"
		}
	}
	recordToolEvent(o.e, o.ctl, ev)
}

// fail reports an error (errno name in native frames, one line on stderr
// in CLI mode) and returns code.
func (o *toolOutput) fail(code int, errno, format string, args ...any) int {
	o.errno = errno
	msg := fmt.Sprintf(format, args...)
	if o.native {
		o.frame(toolFrame{Type: "error", Code: errno, Message: msg})
		o.frame(toolFrame{Type: "done", Status: "error"})
		return code
	}
	line := fmt.Sprintf("%s: %s", errno, ptyterm.EscapeLines(msg))
	if code == exitDenied {
		fmt.Fprint(o.e.Stderr, authority.DeniedLine(o.name, line))
		return code
	}
	fmt.Fprintf(o.e.Stderr, "%s: %s\n", o.name, line)
	return code
}

func runProjectedTool(e *Env, ctl string, locData []byte, args []string) (code int) {
	name := e.Name
	o := &toolOutput{e: e, name: name, native: e.Getenv("CTX_TOOL_MODE") == "native", run: e.Getenv("CTX_RUN_ID"), ctl: ctl}
	if o.run == "" {
		o.run = "r1"
	}
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		desc, _ := fsops.ReadControl(filepath.Join(ctl, "description"))
		fmt.Fprintf(e.Stdout, "%s - %s\n\nMCP tool projected by ctxmcp. Input: one JSON object, as the only\nargument or on standard input. See `ctx man ctx.mcp`.\n",
			name, ptyterm.Escape(strings.TrimSpace(string(desc))))
		return exitOK
	}
	if len(args) == 1 && args[0] == "--agentrc-schema" {
		s, err := fsops.ReadControl(filepath.Join(ctl, "schema"))
		if err != nil {
			return fail(e, exitUnavailable, "schema control: %v", err)
		}
		e.Stdout.Write(s)
		return exitOK
	}
	// Inside a sandbox the run host runs the call, as for every tool.
	if code, ok := brokeredCall(e, name, args); ok {
		return code
	}
	o.start()
	// Every call, allowed, refused or failed, leaves one tool.call event.
	began := time.Now()
	defer func() { o.record(began, code) }()
	if te := authorizeTool(e, name); te != nil {
		o.layer = te.Layer
		return o.fail(te.Exit, errnoName(te.Errno), "%s", te.Msg)
	}
	loc, err := object.ParseLocator(locData)
	if err != nil {
		return o.fail(exitUnavailable, "EIO", "%s/mcp: %v", ctl, err)
	}
	input, code, msg := projectedInput(e, args)
	if code != exitOK {
		return o.fail(code, "EINVAL", "%s", msg)
	}
	if err := validateToolInput(ctl, input); err != nil {
		if errors.Is(err, errBadSchemaControl) {
			return o.fail(exitUnavailable, "EIO", "%v", err)
		}
		return o.fail(exitUsage, "EINVAL", "input %v", err)
	}
	srv, err := lockedServer(loc, name, ctl)
	if err != nil {
		return o.fail(exitUnavailable, "EIO", "%v", err)
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
	if o.native && e.Getenv(mcpstdio.ProgressEnv) == "1" {
		onProgress = func(p mcpstdio.Progress) {
			v := p.Progress
			o.frame(toolFrame{Type: "progress", Progress: &v, Total: p.Total, Message: p.Message})
		}
	}
	var res *mcpstdio.CallResult
	if kc := warmKeeper(ctx, e, loc, srv); kc != nil {
		// Inside a run: the run's live session of the server (WARM
		// SERVERS in ctx man ctxmcp).
		res, err = kc.Call(ctx, loc.Tool, input, onProgress)
		kc.Close()
	} else if ctx.Err() != nil {
		err = mcpstdio.ErrCancelled // while it waited for the keeper
	} else {
		c, serr := mcpstdio.Start(loc.Server, srv, mcpstdio.Options{})
		if serr != nil {
			return o.fail(exitUnavailable, "EIO", "%v", serr)
		}
		res, err = c.CallToolContext(ctx, loc.Tool, input, onProgress)
		c.Close()
	}
	if errors.Is(err, mcpstdio.ErrCancelled) {
		code := exitFailure
		if sig, ok := caught.(syscall.Signal); ok {
			code = cli.Signaled(sig)
		}
		return o.fail(code, "ECANCELED", "cancelled: the server was told to stop the call")
	}
	if err != nil {
		return o.fail(exitUnavailable, "EIO", "%v", err)
	}
	return o.result(res)
}

var errBadSchemaControl = errors.New("schema control")

// toolInput returns the JSON object input: the only argument when there is
// one, else standard input (at most 1 MiB; empty means {}). A terminal on
// stdin with no argument gets a usage message instead of a wait.
func projectedInput(e *Env, args []string) (json.RawMessage, int, string) {
	var data []byte
	switch {
	case len(args) == 1:
		data = []byte(args[0])
	case len(args) > 1:
		return nil, exitUsage, "input must be one JSON object argument, or JSON on standard input"
	default:
		if f, ok := e.Stdin.(*os.File); ok {
			if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
				return nil, exitUsage, "no input: give a JSON object as the argument or on standard input (see --help)"
			}
		}
		b, err := readStdin(e.Stdin, maxToolInput)
		if err != nil {
			return nil, exitUsage, err.Error()
		}
		data = bytes.TrimSpace(b)
		if len(data) == 0 {
			data = []byte("{}")
		}
	}
	var obj map[string]json.RawMessage
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) || json.Unmarshal(data, &obj) != nil {
		return nil, exitUsage, "input is not a JSON object"
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, data)
	return compact.Bytes(), exitOK, ""
}

// validateToolInput checks input against the tool's schema control. A
// missing control means no constraint; an unusable one is the object's
// fault, not the caller's.
func validateToolInput(ctl string, input json.RawMessage) error {
	s, err := fsops.ReadControl(filepath.Join(ctl, "schema"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errBadSchemaControl, err)
	}
	compiled, err := schema.Compile(s)
	if err != nil {
		return fmt.Errorf("%w %s: %v", errBadSchemaControl, filepath.Join(ctl, "schema"), err)
	}
	return compiled.ValidateJSON(input)
}

// lockedServer reads the locator's config and returns the named server.
// With a sha256 in the locator the server's entry must still be the one
// projected: its EntryDigest (only the entry counts, so reformatting the
// file or editing another server leaves the tool working), or, for a
// locator projected before entry digests, the digest of the whole file.
// A stale locator's error says how to project the tool again.
func lockedServer(loc object.Locator, name, ctl string) (mcpstdio.ServerConfig, error) {
	data, err := fsops.ReadRegular(loc.Config, mcpstdio.MaxConfigSize)
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

// result maps tools/call to output.
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
func (o *toolOutput) result(res *mcpstdio.CallResult) int {
	var texts []string
	for _, b := range res.Content {
		var blk struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		_ = json.Unmarshal(b, &blk)
		if blk.Type == "text" && blk.Text != nil {
			texts = append(texts, *blk.Text)
		}
	}
	errMsg := strings.Join(texts, "\n")
	if errMsg == "" {
		errMsg = "remote MCP tool returned an error"
	}
	if o.native {
		if len(res.Content) > 0 || res.Structured != nil {
			o.frame(toolFrame{Type: "message", Role: "tool", Content: res.Content, Structured: compactRaw(res.Structured)})
		}
		if res.IsError {
			return o.fail(exitFailure, "EIO", "%s", errMsg)
		}
		o.frame(toolFrame{Type: "done", Status: "ok"})
		return exitOK
	}
	w := o.e.Stdout
	if res.IsError {
		w = o.e.Stderr
	}
	for _, b := range res.Content {
		var blk struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		_ = json.Unmarshal(b, &blk)
		if blk.Type == "text" && blk.Text != nil {
			if res.IsError {
				continue // the EIO line below carries the text
			}
			io.WriteString(w, *blk.Text)
			if !strings.HasSuffix(*blk.Text, "\n") {
				io.WriteString(w, "\n")
			}
			continue
		}
		io.WriteString(w, ptyterm.Escape(contentNote(b))+"\n")
	}
	if res.Structured != nil && !sameJSONAsAny(res.Structured, texts) {
		w.Write(append(compactRaw(res.Structured), '\n'))
	}
	if res.IsError {
		return o.fail(exitFailure, "EIO", "%s", errMsg)
	}
	return exitOK
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
