package applets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/applets/cli"
	"ctx/fsops"
)

// maxToolInput bounds the JSON input a tool reads from argv or stdin.
const maxToolInput = 1 << 20

// builtinTool describes a tool implemented inside ctx. Its Schema,
// Description and Cap are what bootstrap writes into tool/NAME.d/.
type builtinTool struct {
	Name        string
	Description string
	Cap         string
	Schema      string
	// Bare names the input field that a bare, non-JSON argument or stdin
	// text fills ("path" for fs.read, "cmd" for shell.exec); empty when the
	// tool takes only JSON.
	Bare string
	// CLI turns terminal-style argv (`fs.write PATH TEXT...`) into an input
	// object. Nil means: argv must be one JSON object or one bare value.
	CLI func(args []string, stdin io.Reader) (map[string]any, error)
	// Passthrough tools (bash, tmux, zellij) take their argv as is: no JSON
	// input, no schema validation.
	Passthrough bool
	// Grants are the policy subjects the default tool/NAME.d/policy written
	// by bootstrap allows; the reference agents' policies mirror them.
	Grants []string
	// Run performs the call. It writes plain output to out; errors carry an
	// errno (toolError) that picks the frame code and the exit status.
	Run func(call *toolCall) error
}

// toolCall is one invocation of a builtin tool.
type toolCall struct {
	env    *Env
	tool   *builtinTool
	input  map[string]any
	args   []string  // raw argv, for passthrough tools
	out    io.Writer // plain output (CLI mode) or the message buffer (native)
	native bool
	exit   int // exit status a successful Run wants (shell.exec passes the child's)
}

// toolError is a tool failure with the errno name reported in frames and
// events and the exit status of the process.
type toolError struct {
	Errno syscall.Errno
	Exit  int
	Msg   string
	Layer string // the authority layer that refused; empty for other failures
}

func (e *toolError) Error() string { return e.Msg }

func toolErr(errno syscall.Errno, exit int, format string, args ...any) *toolError {
	return &toolError{Errno: errno, Exit: exit, Msg: fmt.Sprintf(format, args...)}
}

// inputErr is bad input: EINVAL, exit 2.
func inputErr(format string, args ...any) *toolError {
	return toolErr(syscall.EINVAL, exitUsage, format, args...)
}

// fsErr maps a filesystem error to a toolError, keeping its errno.
func fsErr(err error) *toolError {
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	errno := syscall.EIO
	errors.As(err, &errno)
	return &toolError{Errno: errno, Exit: cli.ErrnoExit(errno, exitFailure), Msg: err.Error()}
}

// errnoName returns the errno's symbolic name ("EACCES").
func errnoName(errno syscall.Errno) string {
	if n := unix.ErrnoName(errno); n != "" {
		return n
	}
	return fmt.Sprintf("E%d", int(errno))
}

// runBuiltinTool is the common path of every builtin tool applet: authority
// check, input, schema validation, the call itself, frames or plain output,
// and the tool.call event.
func runBuiltinTool(e *Env, t *builtinTool, args []string) int {
	// Inside a sandbox the run host runs the call (passthrough terminal
	// tools keep the caller's terminal and run here).
	if !t.Passthrough {
		if code, ok := brokeredCall(e, t.Name, args); ok {
			return code
		}
	}
	// A terminal tool runs here, on the caller's terminal; inside a run
	// the host decides it and records it first.
	hostRecorded := false
	if t.Passthrough {
		if code, ok := askDecision(e, t.Name, true); ok {
			if code != 0 {
				return code
			}
			hostRecorded = true
		}
	}
	start := time.Now()
	// The control directory (schema, hooks, log) is found once per call.
	dir := toolControlDir(e, t.Name)
	call := &toolCall{env: e, tool: t, native: e.Getenv("CTX_TOOL_MODE") == "native"}
	frames := newFrameWriter(e, t.Name, call.native)
	frames.start()

	var message bytes.Buffer
	call.out = e.Stdout
	if call.native {
		call.out = &message
	}

	err := func() error {
		if !decidedByHost && !hostRecorded {
			if te := authorizeTool(e, t.Name); te != nil {
				return te
			}
		}
		if errs := runHooks(e, dir, t.Name, "pre", "", nil); len(errs) > 0 {
			return &toolError{Errno: syscall.EACCES, Exit: exitDenied, Layer: "hook", Msg: "permission denied (hook): " + errs[0].Error()}
		}
		call.args = args
		if !t.Passthrough {
			input, err := readToolInput(e, t, args)
			if err != nil {
				return err
			}
			if err := validateBuiltinInput(dir, t, input); err != nil {
				return err
			}
			call.input = input
		}
		return t.Run(call)
	}()

	ev := fsops.Event{Type: "tool.call", Object: "tool/" + t.Name, Status: "ok"}
	code := call.exit
	if err != nil {
		te := fsErr(err)
		code = te.Exit
		ev.Status = "error"
		ev.Errno = errnoName(te.Errno)
		if te.Layer != "" {
			ev.Status = "denied"
			ev.Layer = te.Layer
		}
		if call.native {
			frames.message(message.String())
			frames.error(ev.Errno, te.Msg)
		} else if code == exitDenied {
			// Marked, so that it cannot be mistaken for a command of
			// shell.exec or bash exiting 13 on its own.
			cli.Deniedf(e.Stderr, t.Name, "%s", te.Msg)
		} else {
			cli.Errorf(e.Stderr, t.Name, "%s", te.Msg)
		}
	} else if call.native {
		frames.message(message.String())
	}
	frames.done(err == nil && code == 0)
	if ev.Layer != "hook" {
		for _, herr := range runHooks(e, dir, t.Name, "post", ev.Status, &code) {
			cli.Errorf(e.Stderr, t.Name, "warning: %v", herr)
			ev.Detail = herr.Error()
		}
	}
	ev.Exit = &code
	ev.DurMS = float64(time.Since(start).Microseconds()) / 1000
	if !hostRecorded {
		recordToolEvent(e, dir, ev)
	}
	return code
}

// readToolInput reads the call's input object: one JSON object argument, a
// CLI form, one bare argument, or (with no arguments) stdin holding a JSON
// object or bare text.
func readToolInput(e *Env, t *builtinTool, args []string) (map[string]any, error) {
	if len(args) == 1 && strings.HasPrefix(strings.TrimSpace(args[0]), "{") {
		return decodeInputObject([]byte(args[0]))
	}
	if len(args) > 0 {
		if t.CLI != nil {
			return t.CLI(args, e.Stdin)
		}
		if t.Bare != "" && len(args) == 1 {
			return map[string]any{t.Bare: args[0]}, nil
		}
		return nil, inputErr("expected one JSON object argument, or JSON on stdin")
	}
	data, err := readStdin(e.Stdin, maxToolInput)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		if t.CLI != nil {
			return t.CLI(nil, bytes.NewReader(nil))
		}
		return nil, inputErr("missing input: pass a JSON object as the argument or on stdin")
	}
	if trimmed[0] == '{' {
		return decodeInputObject(trimmed)
	}
	if t.Bare != "" {
		return map[string]any{t.Bare: strings.TrimSuffix(string(data), "\n")}, nil
	}
	return nil, inputErr("input is not a JSON object")
}

// readStdin reads a tool's standard input, at most limit bytes: more is
// EFBIG and bad input (exit 2), a read failure EIO.
func readStdin(r io.Reader, limit int) ([]byte, error) {
	b, err := fsops.ReadLimited(r, "stdin", int64(limit))
	switch {
	case errors.Is(err, syscall.EFBIG):
		return nil, toolErr(syscall.EFBIG, exitUsage, "input larger than %d bytes", limit)
	case err != nil:
		return nil, toolErr(syscall.EIO, exitFailure, "%v", err)
	}
	return b, nil
}

func decodeInputObject(b []byte) (map[string]any, error) {
	if len(b) > maxToolInput {
		return nil, toolErr(syscall.EFBIG, exitUsage, "input larger than %d bytes", maxToolInput)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, inputErr("invalid JSON input: %v", err)
	}
	if dec.More() {
		return nil, inputErr("invalid JSON input: trailing data after the object")
	}
	if v == nil {
		return nil, inputErr("input is not a JSON object")
	}
	return v, nil
}

// stringField returns input[key] when it is a string.
func (c *toolCall) stringField(key string) (string, bool) {
	s, ok := c.input[key].(string)
	return s, ok
}

// frameWriter writes native-mode JSONL frames; in CLI mode it does nothing.
type frameWriter struct {
	w      io.Writer
	run    string
	tool   string
	native bool
}

func newFrameWriter(e *Env, tool string, native bool) *frameWriter {
	run := e.Getenv("CTX_RUN_ID")
	if run == "" {
		run = "r1"
	}
	return &frameWriter{w: e.Stdout, run: run, tool: tool, native: native}
}

func (f *frameWriter) frame(v any) {
	if !f.native {
		return
	}
	b, _ := json.Marshal(v)
	f.w.Write(append(b, '\n'))
}

// The frames, as structs so that "type" comes first on every line.
type (
	startFrame struct {
		Type string `json:"type"`
		Run  string `json:"run"`
		Tool string `json:"tool"`
	}
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	messageFrame struct {
		Type    string      `json:"type"`
		Run     string      `json:"run"`
		Role    string      `json:"role"`
		Content []textBlock `json:"content"`
	}
	errorFrame struct {
		Type    string `json:"type"`
		Run     string `json:"run"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	doneFrame struct {
		Type   string `json:"type"`
		Run    string `json:"run"`
		Status string `json:"status"`
	}
)

func (f *frameWriter) start() { f.frame(startFrame{"start", f.run, f.tool}) }

func (f *frameWriter) message(text string) {
	if text == "" {
		return
	}
	f.frame(messageFrame{"message", f.run, "tool", []textBlock{{"text", text}}})
}

func (f *frameWriter) error(code, msg string) { f.frame(errorFrame{"error", f.run, code, msg}) }

func (f *frameWriter) done(ok bool) {
	status := "ok"
	if !ok {
		status = "error"
	}
	f.frame(doneFrame{"done", f.run, status})
}

// toolObjectPath is the executable this tool call runs as: the path tsh
// authorised (CTX_AUTHORIZED_OBJECT), else argv[0] when it names a path,
// else the kernel's record of the executed file.
func toolObjectPath(e *Env) string {
	if p := e.Getenv("CTX_AUTHORIZED_OBJECT"); filepath.IsAbs(p) {
		return p
	}
	if strings.Contains(e.Argv0, "/") {
		if abs, err := filepath.Abs(e.Argv0); err == nil {
			return abs
		}
	}
	if p, err := os.Readlink("/proc/self/exe"); err == nil {
		return p
	}
	return ""
}

// toolControlDir returns the control directory of the running tool: NAME.d
// beside its executable, else NAME.d in the root's system tier.
func toolControlDir(e *Env, name string) string {
	if p := toolObjectPath(e); p != "" && filepath.Base(p) == name {
		d := p + ".d"
		if st, err := os.Lstat(d); err == nil && st.IsDir() {
			return d
		}
	}
	d := filepath.Join(fsops.SelectRoot("", e.Getenv).ToolDir(), name+".d")
	if st, err := os.Lstat(d); err == nil && st.IsDir() {
		return d
	}
	return ""
}
