package mcpstdio

import (
	"bufio"
	"ctx/fsops/proc"
	"ctx/policy"
	"encoding/json"
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
