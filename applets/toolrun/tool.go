package toolrun

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
	"ctx/fsops/broker"
	"ctx/ptyterm"
)

// maxToolInput bounds the JSON input a tool reads from argv or stdin.
const maxToolInput = 1 << 20

// BuiltinTool is a tool ctx runs in its own process: a builtin (fs.read,
// shell.exec, ...) or an MCP-projected tool (projectedToolApplet). Either
// supplies its Run and what describes it; Execute does everything around
// the call once, for both. Its Schema, Description and Cap are what
// bootstrap writes into tool/NAME.d/ for a builtin.
type BuiltinTool struct {
	Name        string
	Description string
	Cap         string
	// Schema is the compiled-in input schema, used when the control
	// directory has no schema control; empty means no constraint.
	Schema string
	// Bare names the input field that a bare, non-JSON argument or stdin
	// text fills ("path" for fs.read, "cmd" for shell.exec); empty when the
	// tool takes only JSON.
	Bare string
	// CLI turns terminal-style argv (`fs.write PATH TEXT...`) into an input
	// object; it is also asked, with nil args, for the input of an empty
	// stdin. Nil means: argv must be one JSON object or one bare value.
	CLI func(args []string, stdin io.Reader) (map[string]any, error)
	// NoTerminalInput: with no arguments, a terminal on stdin is bad input
	// (a person would sit waiting on a JSON object), not where the input
	// is read from.
	NoTerminalInput bool
	// ErrnoInLines: terminal-mode error lines name the errno, "NAME: EIO:
	// why", as an MCP-projected tool's always have.
	ErrnoInLines bool
	// Ctl is the tool's control directory when the tool found it already
	// (a projected tool); empty means the runner finds it (toolControlDir).
	Ctl string
	// Passthrough tools (bash, tmux, zellij) take their argv as is: no JSON
	// input, no schema validation.
	Passthrough bool
	// Wrapped is a program ctx runs its hooks around on the run host's
	// order (ctx-hooked-tool): the host has decided the call and records
	// it, so there is no broker to ask and no authority check, and the
	// program's output is its own (no frames). Implies Passthrough.
	Wrapped bool
	// Grants are the policy subjects the default tool/NAME.d/policy written
	// by bootstrap allows; the reference agents' policies mirror them.
	Grants []string
	// Run performs the call. It writes plain output to out; errors carry an
	// errno (toolError) that picks the frame code and the exit status.
	Run func(call *ToolCall) error
}

// ToolCall is one invocation of a tool.
type ToolCall struct {
	Env      *cli.Env
	tool     *BuiltinTool
	Input    map[string]any
	RawInput json.RawMessage // the input object as it was given, compacted, when given as JSON
	args     []string        // raw argv, for passthrough tools
	Out      io.Writer       // plain output (CLI mode) or the message buffer (native)
	Frames   *frameWriter    // native mode's frames; a Run may add content and progress
	Native   bool
	Order    *HostOrder // the run host's order the call runs on; nil when it decides itself
	exit     int        // exit status a successful Run wants (shell.exec passes the child's)
}

// ToolError is a tool failure with the errno name reported in frames and
// events and the exit status of the process.
type ToolError struct {
	Errno syscall.Errno
	Exit  int
	Msg   string
	Layer string // the authority layer that refused; empty for other failures
}

func (e *ToolError) Error() string { return e.Msg }

func ToolErr(errno syscall.Errno, exit int, format string, args ...any) *ToolError {
	return &ToolError{Errno: errno, Exit: exit, Msg: fmt.Sprintf(format, args...)}
}

// InputErr is bad input: EINVAL, exit 2.
func InputErr(format string, args ...any) *ToolError {
	return ToolErr(syscall.EINVAL, cli.Usage, format, args...)
}

// FsErr maps a filesystem error to a toolError, keeping its errno.
func FsErr(err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	errno := syscall.EIO
	errors.As(err, &errno)
	return &ToolError{Errno: errno, Exit: cli.ErrnoExit(errno, cli.Failure), Msg: err.Error()}
}

// ErrnoName returns the errno's symbolic name ("EACCES").
func ErrnoName(errno syscall.Errno) string {
	if n := unix.ErrnoName(errno); n != "" {
		return n
	}
	return fmt.Sprintf("E%d", int(errno))
}

// RunTool is the caller's side of every tool ctx runs itself, builtin or
// MCP-projected. Inside a run the run host decides, runs and records the
// call (BrokeredCall; the tool process it orders runs Execute); a terminal
// tool the host decides and records, and it runs here, on the caller's
// terminal. With no host to ask (outside a run, a run without a broker, a
// direct execution: broker.BrokeredEnv set by hand) the call runs here on
// this process's own authority and leaves its event itself.
func RunTool(e *cli.Env, t *BuiltinTool, args []string) int {
	if !t.Passthrough {
		if code, ok := BrokeredCall(e, t.Name, args); ok {
			return code
		}
	}
	if t.Passthrough && !t.Wrapped {
		if code, ok := AskDecision(e, t.Name, true); ok {
			if code != 0 {
				return code
			}
			return Execute(e, t, args, &HostOrder{})
		}
	}
	return Execute(e, t, args, nil)
}

// HostOrder is the run host's order a call runs on: the host decided it
// against the live tree and records it, so the process running it does
// not decide it again and records nothing itself.
type HostOrder struct {
	// HostOps is the call's host-operation channel (the agent.* tools ask
	// the host on it), nil for every other call.
	HostOps *os.File
	// Report hands the host what only the tool knows of the call, once;
	// nil when the host wants nothing more (a terminal tool's call,
	// recorded as started).
	Report func(broker.Report)
}

// Execute is the executing side of a call of t: the authority check
// (unless order says the run host decided it), pre hooks, input and its
// schema, the call itself, frames or plain output, post hooks, and the
// call's tool.call event: recorded here without an order, handed to the
// host (order.Report) with one. It returns the call's exit status.
func Execute(e *cli.Env, t *BuiltinTool, args []string, order *HostOrder) int {
	start := time.Now()
	// The control directory (schema, hooks, log) is found once per call.
	dir := t.Ctl
	if dir == "" {
		dir = toolControlDir(e, t.Name)
	}
	call := &ToolCall{Env: e, tool: t, args: args, Order: order, Native: !t.Wrapped && e.Getenv("CTX_TOOL_MODE") == "native"}
	call.Frames = newFrameWriter(e, t.Name, call.Native)
	call.Frames.start()
	var message bytes.Buffer
	call.Out = e.Stdout
	if call.Native {
		call.Out = &message
	}
	err := call.run(dir, order == nil && !t.Wrapped)

	ev := fsops.Event{Type: "tool.call", Object: "tool/" + t.Name, Status: "ok"}
	code := call.exit
	switch {
	case err != nil:
		code = call.report(err, &ev, message.String())
	case code != 0:
		// A status the tool passes through (shell.exec's command, a
		// wrapped program) is a failed call, as the run host records it
		// and as the done frame says.
		ev.Status = "error"
		fallthrough
	default:
		call.Frames.message(message.String())
	}
	call.Frames.done(err == nil && code == 0)
	if ev.Layer != "hook" {
		for _, herr := range runHooks(e, dir, t.Name, "post", ev.Status, &code) {
			cli.Errorf(e.Stderr, t.Name, "warning: %v", herr)
			ev.Detail = herr.Error()
		}
	}
	ev.Exit = &code
	ev.DurMS = float64(time.Since(start).Microseconds()) / 1000
	switch {
	case order == nil:
		recordToolEvent(e, dir, ev)
	case order.Report != nil && (ev.Errno != "" || ev.Layer != "" || ev.Detail != ""):
		order.Report(broker.Report{Errno: ev.Errno, Layer: ev.Layer, Detail: ev.Detail})
	}
	return code
}

// run is the call up to its result: authority (when the process decides
// the call itself), pre hooks, input and its schema, then the tool's Run.
func (c *ToolCall) run(dir string, authorize bool) error {
	e, t := c.Env, c.tool
	if authorize {
		if te := authorizeTool(e, t.Name); te != nil {
			return te
		}
	}
	if errs := runHooks(e, dir, t.Name, "pre", "", nil); len(errs) > 0 {
		return &ToolError{Errno: syscall.EACCES, Exit: cli.Denied, Layer: "hook", Msg: "permission denied (hook): " + errs[0].Error()}
	}
	if !t.Passthrough {
		input, raw, err := readToolInput(e, t, c.args)
		if err != nil {
			return err
		}
		if err := validateToolInput(dir, t, input); err != nil {
			return err
		}
		c.Input, c.RawInput = input, raw
	}
	return t.Run(c)
}

// report reports a failed call, in frames (what the tool said first) or
// as the one line on stderr, fills the event's status, errno and layer,
// and returns the exit status.
func (c *ToolCall) report(err error, ev *fsops.Event, said string) int {
	te := FsErr(err)
	ev.Status, ev.Errno = "error", ErrnoName(te.Errno)
	switch {
	case te.Layer != "":
		ev.Status, ev.Layer = "denied", te.Layer
	case te.Errno == syscall.ECANCELED:
		ev.Status = "cancelled"
	}
	msg := te.Msg
	switch {
	case c.Native:
		c.Frames.message(said)
		c.Frames.error(ev.Errno, msg)
		return te.Exit
	case c.tool.ErrnoInLines:
		msg = ev.Errno + ": " + msg
	}
	if te.Exit == cli.Denied {
		// Marked, so that it cannot be mistaken for a command of
		// shell.exec or bash exiting 13 on its own.
		cli.Deniedf(c.Env.Stderr, c.tool.Name, "%s", msg)
	} else {
		cli.Errorf(c.Env.Stderr, c.tool.Name, "%s", msg)
	}
	return te.Exit
}

// readToolInput reads the call's input object: one JSON object argument, a
// CLI form, one bare argument, or (with no arguments) stdin holding a JSON
// object or bare text. raw is the object as given when it was given as
// JSON.
func readToolInput(e *cli.Env, t *BuiltinTool, args []string) (input map[string]any, raw json.RawMessage, err error) {
	if len(args) == 1 && strings.HasPrefix(strings.TrimSpace(args[0]), "{") {
		return DecodeInputObject([]byte(args[0]))
	}
	if len(args) > 0 {
		switch {
		case t.CLI != nil:
			input, err = t.CLI(args, e.Stdin)
		case t.Bare != "" && len(args) == 1:
			input = map[string]any{t.Bare: args[0]}
		default:
			err = InputErr("expected one JSON object argument, or JSON on stdin")
		}
		return input, nil, err
	}
	if t.NoTerminalInput && ptyterm.IsTerminal(e.Stdin) {
		return nil, nil, InputErr("no input: give a JSON object as the argument or on standard input (see --help)")
	}
	data, err := readStdin(e.Stdin, maxToolInput)
	if err != nil {
		return nil, nil, err
	}
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '{':
		return DecodeInputObject(trimmed)
	case len(trimmed) == 0 && t.CLI != nil:
		input, err = t.CLI(nil, bytes.NewReader(nil))
	case len(trimmed) == 0:
		err = InputErr("missing input: pass a JSON object as the argument or on stdin")
	case t.Bare != "":
		input = map[string]any{t.Bare: strings.TrimSuffix(string(data), "\n")}
	default:
		err = InputErr("input is not a JSON object")
	}
	return input, nil, err
}

// readStdin reads a tool's standard input, at most limit bytes: more is
// EFBIG and bad input (exit 2), a read failure EIO.
func readStdin(r io.Reader, limit int) ([]byte, error) {
	b, err := fsops.ReadLimited(r, "stdin", int64(limit))
	switch {
	case errors.Is(err, syscall.EFBIG):
		return nil, ToolErr(syscall.EFBIG, cli.Usage, "input larger than %d bytes", limit)
	case err != nil:
		return nil, ToolErr(syscall.EIO, cli.Failure, "%v", err)
	}
	return b, nil
}

// DecodeInputObject decodes one JSON object (numbers kept as written) and
// returns it with its compacted text.
func DecodeInputObject(b []byte) (map[string]any, json.RawMessage, error) {
	if len(b) > maxToolInput {
		return nil, nil, ToolErr(syscall.EFBIG, cli.Usage, "input larger than %d bytes", maxToolInput)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, InputErr("invalid JSON input: %v", err)
	}
	if dec.More() {
		return nil, nil, InputErr("invalid JSON input: trailing data after the object")
	}
	if v == nil {
		return nil, nil, InputErr("input is not a JSON object")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, nil, InputErr("invalid JSON input: %v", err)
	}
	return v, compact.Bytes(), nil
}

// stringField returns input[key] when it is a string.
func (c *ToolCall) stringField(key string) (string, bool) {
	s, ok := c.Input[key].(string)
	return s, ok
}

// toolObjectPath is the executable this tool call runs as: the path tsh
// authorised (CTX_AUTHORIZED_OBJECT), else argv[0] when it names a path,
// else the kernel's record of the executed file.
func toolObjectPath(e *cli.Env) string {
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
func toolControlDir(e *cli.Env, name string) string {
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
