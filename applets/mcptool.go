package applets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"ctx/applets/authority"
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

// toolFrame is one JSONL frame of native mode; fields in ABI order.
type toolFrame struct {
	Type    string            `json:"type"`
	Run     string            `json:"run"`
	Tool    string            `json:"tool,omitempty"`
	Role    string            `json:"role,omitempty"`
	Content []json.RawMessage `json:"content,omitempty"`
	Code    string            `json:"code,omitempty"`
	Message string            `json:"message,omitempty"`
	Status  string            `json:"status,omitempty"`
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
		if o.layer != "" {
			ev.Status, ev.Layer = "denied", o.layer
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
	srv, err := lockedServer(loc)
	if err != nil {
		return o.fail(exitUnavailable, "EIO", "%v", err)
	}
	c, err := mcpstdio.Start(loc.Server, srv, mcpstdio.Options{})
	if err != nil {
		return o.fail(exitUnavailable, "EIO", "%v", err)
	}
	res, err := c.CallTool(loc.Tool, input)
	c.Close()
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

// lockedServer reads the locator's config, verifies it is byte for byte the
// one projected (sha256), and returns the named server.
func lockedServer(loc object.Locator) (mcpstdio.ServerConfig, error) {
	data, err := fsops.ReadRegular(loc.Config, mcpstdio.MaxConfigSize)
	if err != nil {
		return mcpstdio.ServerConfig{}, fmt.Errorf("config: %v", err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != loc.SHA256 {
		return mcpstdio.ServerConfig{}, fmt.Errorf("config %s changed since projection (sha256 %s, locator says %s)", loc.Config, got, loc.SHA256)
	}
	cfg, err := mcpstdio.ParseConfig(data)
	if err != nil {
		return mcpstdio.ServerConfig{}, fmt.Errorf("config %s: %v", loc.Config, err)
	}
	srv, ok := cfg.Servers[loc.Server]
	if !ok {
		return mcpstdio.ServerConfig{}, fmt.Errorf("config %s has no server %q", loc.Config, loc.Server)
	}
	return srv, nil
}

// result maps tools/call to output. CLI: text blocks as text, other blocks
// one JSON line each, structuredContent as a JSON line unless a text block
// already holds the same JSON value. Native: one message frame with the
// blocks (structuredContent appended as a text block under the same rule).
// isError: EIO with the remote text, exit 1.
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
	if res.IsError {
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "remote MCP tool returned an error"
		}
		return o.fail(exitFailure, "EIO", "%s", msg)
	}
	var extra json.RawMessage
	if res.Structured != nil && !sameJSONAsAny(res.Structured, texts) {
		var compact bytes.Buffer
		_ = json.Compact(&compact, res.Structured)
		extra = compact.Bytes()
	}
	if o.native {
		content := append([]json.RawMessage{}, res.Content...)
		if extra != nil {
			content = append(content, mcpstdio.TextBlock(string(extra)))
		}
		o.frame(toolFrame{Type: "message", Role: "tool", Content: content})
		o.frame(toolFrame{Type: "done", Status: "ok"})
		return exitOK
	}
	for _, b := range res.Content {
		var blk struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		_ = json.Unmarshal(b, &blk)
		if blk.Type == "text" && blk.Text != nil {
			io.WriteString(o.e.Stdout, *blk.Text)
			if !strings.HasSuffix(*blk.Text, "\n") {
				io.WriteString(o.e.Stdout, "\n")
			}
			continue
		}
		var compact bytes.Buffer
		_ = json.Compact(&compact, b)
		o.e.Stdout.Write(append(compact.Bytes(), '\n'))
	}
	if extra != nil {
		o.e.Stdout.Write(append(extra, '\n'))
	}
	return exitOK
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
