package mcpstdio

import (
	"bufio"
	"context"
	"ctx/fsops/proc"
	"ctx/policy"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// AdvertisedVersion is the protocol version the client asks for.
const AdvertisedVersion = "2025-11-25"

// StableVersions are the negotiated versions the client accepts (and the
// server answers with when a client asks for one of them). Drafts,
// unknown and future versions are refused.
var StableVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

func isStable(v string) bool {
	for _, s := range StableVersions {
		if v == s {
			return true
		}
	}
	return false
}

// Client limits.
const (
	MaxTools     = 1024
	MaxToolPages = 64
	// DefaultRequestTimeout bounds the wait for each response.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultKillGrace is how long a server gets between SIGTERM and SIGKILL.
	DefaultKillGrace = 300 * time.Millisecond
	// MaxProgressWait bounds a request kept alive by progress
	// notifications: each one restarts the request timeout (as MCP allows),
	// but never past this much time in all.
	MaxProgressWait = 10 * time.Minute
	// stderrKeep is how much of the server's stderr is kept for error
	// messages; the rest is read and discarded so the server never blocks.
	stderrKeep = 64 << 10
)

// ServerPATH is the PATH a server starts with (its config's env may
// override it) and the path its command is looked up in.
const ServerPATH = "/usr/bin:/bin"

// Options tunes a client; zero values mean the defaults.
type Options struct {
	RequestTimeout time.Duration
	KillGrace      time.Duration
	ClientVersion  string // clientInfo.version
	// Dir is the directory the server starts in; "" is ours.
	Dir string
}

// Client is a running MCP server process and its session. Its methods may
// be called from several goroutines; responses are matched by id, so they
// may arrive in any order.
type Client struct {
	name string
	opts Options
	cmd  *exec.Cmd
	tree *proc.ChildTree

	wmu   sync.Mutex
	stdin *os.File

	mu      sync.Mutex
	pending map[int64]chan *message
	nextID  int64
	// progress routes notifications/progress by their token (the id of
	// the request that asked for them) to that request's handler.
	progress map[int64]func(Progress)
	readErr  error         // why the reader stopped, set before done closes
	done     chan struct{} // closed when the reader stops
	stdout   *os.File
	stderrR  *os.File
	stderr   tail
	// stderrDone closes when the server's stderr reaches EOF.
	stderrDone chan struct{}

	protocol  string
	closeOnce sync.Once
	closed    chan struct{}
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrKeep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-stderrKeep:]...)
	}
	return len(p), nil
}

// lastLine is the last non-empty line, at most 512 bytes.
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(t.buf), "\n\r\t "), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 512 {
		l = l[len(l)-512:]
	}
	return l
}

// Error is a client failure, naming the server and the step.
type Error struct {
	Server string
	Op     string // "start", "initialize", "tools/list", "tools/call", ...
	Err    error
	Stderr string // the server's last stderr line, when there was one
}

func (e *Error) Error() string {
	s := fmt.Sprintf("server %s: %s: %v", e.Server, e.Op, e.Err)
	if e.Stderr != "" {
		s += " (server stderr: " + e.Stderr + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Environ is the environment a server starts with: PATH=ServerPATH, then
// its declared env (which may replace PATH), sorted. Nothing of ours is
// inherited.
func Environ(s ServerConfig) []string {
	env := map[string]string{"PATH": ServerPATH}
	for k, v := range s.Env {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// lookCommand resolves a command without a slash in the server's own PATH,
// never ours.
func lookCommand(s ServerConfig) (string, error) {
	if strings.Contains(s.Command, "/") {
		return s.Command, nil
	}
	path := ServerPATH
	if p, ok := s.Env["PATH"]; ok {
		path = p
	}
	if p, err := proc.LookPath(s.Command, path); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("command %q not found in PATH=%s", s.Command, path)
}

// Start spawns the server with a cleared environment (see Environ) in its
// own process group, as a tree that Close ends whole (proc.StartTree),
// then runs the initialize handshake. On any failure the server and
// everything it started are already gone when Start returns.
func Start(name string, s ServerConfig, opts Options) (*Client, error) {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	c := &Client{name: name, opts: opts, pending: map[int64]chan *message{}, progress: map[int64]func(Progress){},
		done: make(chan struct{}), closed: make(chan struct{}),
		stderrDone: make(chan struct{})}
	fail := func(op string, err error) error { return &Error{Server: name, Op: op, Err: err} }
	path, err := lookCommand(s)
	if err != nil {
		return nil, fail("start", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fail("start", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fail("start", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fail("start", err)
	}
	// Our own pipes, not StdoutPipe: exec.Cmd.Wait would close those under
	// the reader, losing the server's last words.
	c.cmd = &exec.Cmd{
		Path:   path,
		Args:   append([]string{s.Command}, s.Args...),
		Env:    Environ(s),
		Dir:    opts.Dir,
		Stdin:  inR,
		Stdout: outW,
		Stderr: errW,
	}
	c.tree, err = proc.StartTree(c.cmd)
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fail("start", err)
	}
	c.stdin, c.stdout, c.stderrR = inW, outR, errR
	go func() {
		// Drains until every writer is gone or Close closes the pipe.
		_, _ = io.Copy(&c.stderr, errR)
		close(c.stderrDone)
	}()
	go c.readLoop(bufio.NewReaderSize(outR, 64<<10))

	if err := c.initialize(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// alive reports whether the session can still take a request: its
// reader runs, the server has not exited and Close was not called.
func (c *Client) alive() bool {
	select {
	case <-c.done:
	case <-c.tree.Exited():
	case <-c.closed:
	default:
		// The watcher may not have run yet: ask the kernel whether the
		// server has exited (without reaping it).
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, c.tree.Pid(), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		// An exited child fills in SIGCHLD; ECHILD: reaped already.
		return err == nil && info.Signo == 0
	}
	return false
}

// notSent marks a request that never reached the server (writing it
// failed): it may be sent again, to a new server, without doing anything
// twice. Its text is the error's own.
type notSent struct{ error }

func (n notSent) Unwrap() error { return n.error }

// Pgid is the server's process group id (its pid).
func (c *Client) Pgid() int { return c.tree.Pid() }

// ProtocolVersion is the negotiated protocol version.
func (c *Client) ProtocolVersion() string { return c.protocol }

func (c *Client) readLoop(r *bufio.Reader) {
	err := c.read(r)
	c.mu.Lock()
	c.readErr = err
	c.mu.Unlock()
	close(c.done)
}

func (c *Client) read(r *bufio.Reader) error {
	for {
		frame, err := readFrameOrStop(r)
		if err != nil {
			if err == io.EOF {
				return errors.New("server closed its output")
			}
			return err
		}
		if len(strings.TrimSpace(string(frame))) == 0 {
			continue // blank lines carry nothing
		}
		m, err := parseMessage(frame)
		if err != nil {
			return err
		}
		switch {
		case m.isResponse() || (m.Method == "" && m.Error != nil):
			id, ok := intID(m.ID)
			c.mu.Lock()
			ch := c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if ok && ch != nil {
				ch <- m
			}
			// A response to nothing we asked is ignored.
		case m.isRequest():
			c.answerServerRequest(m)
		case m.Method == "notifications/progress":
			c.routeProgress(m.Params)
		default:
			// Other notifications (logging, list_changed) are ignored.
		}
	}
}

// answerServerRequest answers ping; every other server-to-client request
// (sampling, roots, elicitation) is refused: ctx offers no capabilities.
func (c *Client) answerServerRequest(m *message) {
	reply := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if m.Method == "ping" {
		reply["result"] = struct{}{}
	} else {
		reply["error"] = &RPCError{Code: codeMethodNotFound, Message: "Method not found"}
	}
	_ = c.write(encodeFrame(reply)) // a failed write surfaces on the next request
}

// write sends one frame. A server that stops reading its input cannot
// block us forever: the write has the request timeout as its deadline.
func (c *Client) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.stdin.SetWriteDeadline(time.Now().Add(c.opts.RequestTimeout))
	n, err := c.stdin.Write(frame)
	if err != nil && n > 0 {
		return partWritten{err}
	}
	return err
}

// partWritten is a write that failed after part of the frame went out.
type partWritten struct{ error }

func (p partWritten) Unwrap() error { return p.error }

// serverGone explains a dead session: how the server exited, or why the
// reader stopped. A dying server's last stderr line often arrives just
// after its stdout closed, so give stderr a moment to drain first.
func (c *Client) serverGone() error {
	select {
	case <-c.stderrDone:
	case <-time.After(200 * time.Millisecond):
	}
	select {
	case <-c.tree.Exited():
		return errors.New("server exited before answering")
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readErr != nil {
		return c.readErr
	}
	return errors.New("session closed")
}

// Progress is one notifications/progress of a request.
type Progress struct {
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// ErrCancelled is returned for a request whose context ended first: the
// server was sent notifications/cancelled for it.
var ErrCancelled = errors.New("cancelled")

// routeProgress hands a progress notification to the handler of the
// request whose token it carries; notifications for anything else are
// dropped.
func (c *Client) routeProgress(params json.RawMessage) {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
		Progress
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, ok := intID(p.Token)
	if !ok {
		return
	}
	c.mu.Lock()
	h := c.progress[id]
	c.mu.Unlock()
	if h != nil {
		h(p.Progress)
	}
}

// request sends one request and waits for its response.
func (c *Client) request(method string, params map[string]any) (json.RawMessage, error) {
	return c.requestCtx(context.Background(), method, params, nil)
}

// requestCtx sends one request and waits for its response, at most the
// request timeout. With onProgress the request carries a progressToken
// (its own id), each progress notification goes to onProgress and restarts
// the timeout (up to MaxProgressWait in all). When ctx ends first, or the
// timeout passes, the server is sent notifications/cancelled for the
// request, as MCP asks of a client that stops waiting.
func (c *Client) requestCtx(ctx context.Context, method string, params map[string]any, onProgress func(Progress)) (json.RawMessage, error) {
	fail := func(err error) (json.RawMessage, error) {
		// err is evaluated first: serverGone waits for stderr to drain.
		return nil, &Error{Server: c.name, Op: method, Err: err, Stderr: c.stderr.lastLine()}
	}
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan *message, 1)
	c.pending[id] = ch
	progressed := make(chan struct{}, 1)
	if onProgress != nil {
		c.progress[id] = func(p Progress) {
			onProgress(p)
			select {
			case progressed <- struct{}{}:
			default:
			}
		}
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		delete(c.progress, id)
		c.mu.Unlock()
	}()
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if onProgress != nil {
		if params == nil {
			params = map[string]any{}
		}
		params["_meta"] = map[string]any{"progressToken": id}
	}
	if params != nil {
		req["params"] = params
	}
	if err := c.write(encodeFrame(req)); err != nil {
		// Unless part of it went out, the request may go to another
		// server (notSent).
		mark := func(e error) error {
			if errors.As(err, new(partWritten)) {
				return e
			}
			return notSent{e}
		}
		select {
		case <-c.done:
			return fail(mark(c.serverGone()))
		case <-time.After(50 * time.Millisecond):
		}
		return fail(mark(fmt.Errorf("writing request: %v", err)))
	}
	cancelled := func(reason string) {
		_ = c.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": reason})
	}
	began := time.Now()
	timer := time.NewTimer(c.opts.RequestTimeout)
	defer timer.Stop()
	for {
		select {
		case m := <-ch:
			if m.Error != nil {
				return fail(m.Error)
			}
			if len(m.Result) == 0 || string(m.Result) == "null" {
				return fail(errors.New("response without a result"))
			}
			return m.Result, nil
		case <-c.done:
			// A response may have raced with the reader's end.
			select {
			case m := <-ch:
				if m.Error != nil {
					return fail(m.Error)
				}
				return m.Result, nil
			default:
			}
			return fail(c.serverGone())
		case <-progressed:
			if time.Since(began) < MaxProgressWait {
				if !timer.Stop() {
					select {
					case <-timer.C:
					default:
					}
				}
				timer.Reset(c.opts.RequestTimeout)
			}
		case <-ctx.Done():
			cancelled("the caller cancelled the call")
			return fail(ErrCancelled)
		case <-timer.C:
			cancelled("timed out")
			return fail(fmt.Errorf("no response within %v", c.opts.RequestTimeout))
		}
	}
}

func (c *Client) notify(method string, params any) error {
	n := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		n["params"] = params
	}
	if err := c.write(encodeFrame(n)); err != nil {
		return &Error{Server: c.name, Op: method, Err: err, Stderr: c.stderr.lastLine()}
	}
	return nil
}

func (c *Client) initialize() error {
	version := c.opts.ClientVersion
	if version == "" {
		version = "0"
	}
	res, err := c.request("initialize", map[string]any{
		"protocolVersion": AdvertisedVersion,
		"capabilities":    struct{}{},
		"clientInfo":      map[string]string{"name": "ctx", "version": version},
	})
	if err != nil {
		return err
	}
	fail := func(format string, args ...any) error {
		return &Error{Server: c.name, Op: "initialize", Err: fmt.Errorf(format, args...)}
	}
	var r struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fail("malformed result: %v", err)
	}
	var v string
	if len(r.ProtocolVersion) == 0 || r.ProtocolVersion[0] != '"' || json.Unmarshal(r.ProtocolVersion, &v) != nil {
		return fail("result has no protocolVersion string")
	}
	if !isStable(v) {
		return fail("negotiated protocol version %q is not supported (accepted: %s)", v, strings.Join(StableVersions, " "))
	}
	caps, err := policy.StrictObject(r.Capabilities)
	if err != nil {
		return fail("capabilities: %v", err)
	}
	tools, ok := caps["tools"]
	if !ok || len(tools) == 0 || tools[0] != '{' {
		return fail("server does not offer tools (capabilities.tools is not an object)")
	}
	c.protocol = v
	return c.notify("notifications/initialized", nil)
}

// Tool is one tool a server lists.
type Tool struct {
	Name        string
	Title       string // the top-level title; "" when absent
	Description string
	InputSchema json.RawMessage
	// OutputSchema and Annotations are the server's objects as sent; nil
	// when absent or not objects (optional metadata a server gets wrong
	// does not cost it the listing).
	OutputSchema json.RawMessage
	Annotations  json.RawMessage
	TaskSupport  string // execution.taskSupport; "" when absent
}

// ListTools pages through tools/list: at most MaxToolPages pages and
// MaxTools tools.
func (c *Client) ListTools() ([]Tool, error) {
	var tools []Tool
	var cursor *string
	fail := func(format string, args ...any) ([]Tool, error) {
		return nil, &Error{Server: c.name, Op: "tools/list", Err: fmt.Errorf(format, args...)}
	}
	for page := 1; ; page++ {
		if page > MaxToolPages {
			return fail("more than %d pages", MaxToolPages)
		}
		var params map[string]any
		if cursor != nil {
			params = map[string]any{"cursor": *cursor}
		}
		res, err := c.requestCtx(context.Background(), "tools/list", params, nil)
		if err != nil {
			return nil, err
		}
		var r struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor *string           `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return fail("malformed result: %v", err)
		}
		if r.Tools == nil {
			return fail("result has no tools array")
		}
		for i, raw := range r.Tools {
			t, err := parseTool(raw)
			if err != nil {
				return fail("page %d, tool %d: %v", page, i, err)
			}
			if len(tools) == MaxTools {
				return fail("more than %d tools", MaxTools)
			}
			tools = append(tools, t)
		}
		if r.NextCursor == nil {
			return tools, nil
		}
		cursor = r.NextCursor
	}
}

func parseTool(raw json.RawMessage) (Tool, error) {
	var t Tool
	var w struct {
		Name         *string         `json:"name"`
		Title        json.RawMessage `json:"title"`
		Description  *string         `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  json.RawMessage `json:"annotations"`
		Execution    *struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	if len(raw) == 0 || raw[0] != '{' {
		return t, errors.New("not an object")
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return t, err
	}
	if w.Name == nil {
		return t, errors.New("no name")
	}
	t.Name = *w.Name
	if w.Description != nil {
		t.Description = *w.Description
	}
	if len(w.InputSchema) == 0 || w.InputSchema[0] != '{' {
		return t, fmt.Errorf("tool %q: inputSchema is not an object", t.Name)
	}
	t.InputSchema = w.InputSchema
	_ = json.Unmarshal(w.Title, &t.Title) // not a string: no title
	if len(w.OutputSchema) > 0 && w.OutputSchema[0] == '{' {
		t.OutputSchema = w.OutputSchema
	}
	if len(w.Annotations) > 0 && w.Annotations[0] == '{' {
		t.Annotations = w.Annotations
	}
	if w.Execution != nil {
		t.TaskSupport = w.Execution.TaskSupport
	}
	return t, nil
}

// CallResult is the result of tools/call.
type CallResult struct {
	Content    []json.RawMessage // content blocks, each an object with a "type"
	Structured json.RawMessage   // structuredContent; nil when absent
	IsError    bool
}

// CallTool calls tool name with arguments (a JSON object).
func (c *Client) CallTool(name string, arguments json.RawMessage) (*CallResult, error) {
	return c.CallToolContext(context.Background(), name, arguments, nil)
}

// CallToolContext is CallTool that sends notifications/cancelled for the
// call and returns an error wrapping ErrCancelled when ctx ends first, and
// with onProgress asks for progress and hands it each notification.
func (c *Client) CallToolContext(ctx context.Context, name string, arguments json.RawMessage, onProgress func(Progress)) (*CallResult, error) {
	if len(arguments) == 0 {
		arguments = json.RawMessage("{}")
	}
	res, err := c.requestCtx(ctx, "tools/call", map[string]any{"name": name, "arguments": arguments}, onProgress)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) (*CallResult, error) {
		return nil, &Error{Server: c.name, Op: "tools/call", Err: fmt.Errorf(format, args...)}
	}
	var r struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fail("malformed result: %v", err)
	}
	for i, b := range r.Content {
		var block struct {
			Type string `json:"type"`
		}
		if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &block) != nil || block.Type == "" {
			return fail("content[%d] is not a content block", i)
		}
	}
	out := &CallResult{Content: r.Content, IsError: r.IsError}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		out.Structured = r.StructuredContent
	}
	return out, nil
}

// Close ends the session and the server's whole tree, on every path, the
// way MCP's stdio shutdown goes: stdin is closed and the server gets the
// grace period to exit on its own (reading what it was sent last, such as
// a notifications/cancelled), then the server and its process group get
// SIGTERM, then SIGKILL after the grace period, and then every process the
// server started, in its group or not (setsid, double fork), is killed and
// reaped (proc.ChildTree).
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.stdin.Close()
		select {
		case <-c.tree.Exited():
		case <-time.After(c.opts.KillGrace):
		}
		c.tree.Stop(c.opts.KillGrace)
		_ = c.tree.Wait() // its exit status is not ours to report
		// Closing our read ends unblocks the reader even if a process out
		// of reach still holds the write ends.
		c.stdout.Close()
		c.stderrR.Close()
		<-c.done
		close(c.closed)
	})
	return nil
}
