package mcpstdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A keeper holds one live session of one MCP server for as long as it runs
// and serves tools/call to other processes over a unix stream socket: the
// warm servers of an agent's run (ctx man ctxmcp, WARM SERVERS). The server
// is started on the first call, started again on the call after it died,
// and shared by every call; a call's cancellation reaches the server as
// notifications/cancelled for that call only.
//
// The protocol is one JSON object per line. On connecting, the keeper
// says what it serves:
//
//	{"keeper":1,"server":NAME,"entry":SHA256,"cwd":DIR,"pid":PID}
//
// and the caller checks all of it (DialKeeper) before it sends its one
// call:
//
//	{"tool":T,"arguments":{...},"progress":true}
//
// The keeper answers with any number of {"progress":{...}} lines (only when
// asked for), then one {"result":{"content":[...],"structuredContent":...,
// "isError":B}} or {"error":MESSAGE} (with "cancelled":true for a cancelled
// call). The caller may send {"cancel":true} at any time; closing the
// connection before the answer cancels too.

// KeeperProtocol is the version of the keeper protocol in the hello.
const KeeperProtocol = 1

const (
	// maxKeeperLine bounds one protocol line: a call's arguments or a
	// result (each at most MaxFrame) and their envelope.
	maxKeeperLine = 2*MaxFrame + 4096
	// keeperHelloWait bounds the wait for a keeper's hello.
	keeperHelloWait = 5 * time.Second
	// keeperCancelWait is how long a cancelled call waits for the keeper
	// to say the server was told before it gives up.
	keeperCancelWait = 2 * time.Second
	// keeperWriteWait bounds one write to a caller that stopped reading.
	keeperWriteWait = 30 * time.Second
)

// KeeperSpec is the server a keeper keeps: its name and entry in the
// configuration, and the directory it starts in (the calling tool's).
type KeeperSpec struct {
	Name   string       `json:"name"`
	Server ServerConfig `json:"server"`
	Cwd    string       `json:"cwd"`
}

type keeperHello struct {
	Keeper int    `json:"keeper"`
	Server string `json:"server"`
	Entry  string `json:"entry"`
	Cwd    string `json:"cwd"`
	Pid    int    `json:"pid"`
}

type keeperCall struct {
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Progress  bool            `json:"progress,omitempty"`
	Cancel    bool            `json:"cancel,omitempty"`
}

type keeperResult struct {
	Content    []json.RawMessage `json:"content"`
	Structured json.RawMessage   `json:"structuredContent,omitempty"`
	IsError    bool              `json:"isError,omitempty"`
}

type keeperReply struct {
	Progress  *Progress     `json:"progress,omitempty"`
	Result    *keeperResult `json:"result,omitempty"`
	Error     string        `json:"error,omitempty"`
	Cancelled bool          `json:"cancelled,omitempty"`
}

// Keeper serves calls of one server from one shared session.
type Keeper struct {
	// Ancestor, when not 0, is a process every caller must descend from
	// (the run's init): another agent of the same uid outside the run is
	// not served even if it reaches the socket.
	Ancestor int

	spec  KeeperSpec
	entry string
	opts  Options
	uid   int

	mu     sync.Mutex
	c      *Client
	starts int
	closed bool
}

// NewKeeper returns a keeper of spec; its server starts with the first
// call, in spec.Cwd unless opts.Dir says otherwise.
func NewKeeper(spec KeeperSpec, opts Options) *Keeper {
	if opts.Dir == "" {
		opts.Dir = spec.Cwd
	}
	return &Keeper{spec: spec, entry: EntryDigest(spec.Server), opts: opts, uid: os.Geteuid()}
}

// Starts is how many times the keeper has started its server.
func (k *Keeper) Starts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.starts
}

// Serve accepts and serves callers on ln until ln is closed. Only a peer
// of the keeper's own uid (SO_PEERCRED) is served.
func (k *Keeper) Serve(ln *net.UnixListener) error {
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			time.Sleep(50 * time.Millisecond) // out of descriptors: wait
			continue
		}
		go k.serveConn(conn)
	}
}

// Close ends the session and the server's whole tree (Client.Close); calls
// after it fail.
func (k *Keeper) Close() {
	k.mu.Lock()
	c := k.c
	k.c, k.closed = nil, true
	k.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// session returns the live session, starting the server when there is
// none or the last one died. Callers wait for a start under way.
func (k *Keeper) session() (*Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, &Error{Server: k.spec.Name, Op: "start", Err: errors.New("the server's keeper is shutting down")}
	}
	if c := k.c; c != nil {
		if c.alive() {
			return c, nil
		}
		k.c = nil
		go c.Close() // the watcher may be at it already: Close runs once
	}
	c, err := Start(k.spec.Name, k.spec.Server, k.opts)
	if err != nil {
		return nil, err
	}
	k.c = c
	k.starts++
	go k.watch(c)
	return c, nil
}

// retire drops c as the live session, if it still is.
func (k *Keeper) retire(c *Client) {
	k.mu.Lock()
	if k.c == c {
		k.c = nil
	}
	k.mu.Unlock()
	go c.Close()
}

// watch ends a session whose server died (or stopped talking) as soon as
// it does, so its tree is reaped between calls and the next call starts a
// new one. A server that exited gets the kill grace to have its last
// answers read.
func (k *Keeper) watch(c *Client) {
	select {
	case <-c.done:
	case <-c.tree.Exited():
		select {
		case <-c.done:
		case <-time.After(c.opts.KillGrace):
		}
	case <-c.closed:
		return
	}
	k.mu.Lock()
	if k.c == c {
		k.c = nil
	}
	k.mu.Unlock()
	c.Close()
}

// replies queues a call's progress lines for their writer; they are
// dropped when the caller is slow, and after close.
type replies struct {
	mu     sync.Mutex
	ch     chan []byte
	closed bool
}

func (r *replies) send(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.ch <- b:
	default:
	}
}

func (r *replies) close() {
	r.mu.Lock()
	r.closed = true
	close(r.ch)
	r.mu.Unlock()
}

func (k *Keeper) serveConn(conn *net.UnixConn) {
	defer conn.Close()
	pid, uid, err := PeerCred(conn)
	if err != nil || uid != k.uid || (k.Ancestor > 0 && !descendsFrom(pid, k.Ancestor)) {
		return
	}
	write := func(v any) {
		_ = conn.SetWriteDeadline(time.Now().Add(keeperWriteWait))
		_, _ = conn.Write(encodeFrame(v))
	}
	write(keeperHello{Keeper: KeeperProtocol, Server: k.spec.Name, Entry: k.entry, Cwd: k.spec.Cwd, Pid: os.Getpid()})

	r := bufio.NewReaderSize(conn, 64<<10)
	line, err := readLine(r, maxKeeperLine)
	if err != nil {
		return
	}
	var call keeperCall
	if json.Unmarshal(line, &call) != nil || call.Tool == "" {
		write(keeperReply{Error: "malformed keeper request"})
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// A cancel line, or the caller gone, cancels the call.
		defer cancel()
		for {
			line, err := readLine(r, maxKeeperLine)
			if err != nil {
				return
			}
			var m keeperCall
			if json.Unmarshal(line, &m) == nil && m.Cancel {
				return
			}
		}
	}()
	c, err := k.session()
	if err != nil {
		write(keeperReply{Error: err.Error()})
		return
	}
	var onProgress func(Progress)
	var progress *replies
	var written chan struct{}
	if call.Progress {
		// Progress is written by a goroutine of its own: the shared
		// session's reader hands it over and never waits for a caller.
		progress = &replies{ch: make(chan []byte, 64)}
		written = make(chan struct{})
		go func() {
			defer close(written)
			failed := false
			for b := range progress.ch {
				if failed {
					continue
				}
				_ = conn.SetWriteDeadline(time.Now().Add(keeperWriteWait))
				if _, err := conn.Write(b); err != nil {
					failed = true
				}
			}
		}()
		onProgress = func(p Progress) { progress.send(encodeFrame(keeperReply{Progress: &p})) }
	}
	res, err := c.CallToolContext(ctx, call.Tool, call.Arguments, onProgress)
	if errors.As(err, new(notSent)) {
		// The server died before it got the call (killed between calls,
		// and the keeper had not seen it yet): once more, on a new one.
		k.retire(c)
		if c, err = k.session(); err == nil {
			res, err = c.CallToolContext(ctx, call.Tool, call.Arguments, onProgress)
		}
	}
	if progress != nil {
		progress.close()
		<-written
	}
	switch {
	case errors.Is(err, ErrCancelled):
		write(keeperReply{Error: err.Error(), Cancelled: true})
	case err != nil:
		write(keeperReply{Error: err.Error()})
	default:
		content := res.Content
		if content == nil {
			content = []json.RawMessage{}
		}
		write(keeperReply{Result: &keeperResult{Content: content, Structured: res.Structured, IsError: res.IsError}})
	}
}

// KeeperConn is a caller's connection to a keeper, for one call.
type KeeperConn struct {
	conn *net.UnixConn
	r    *bufio.Reader
	name string
	pid  int
}

// KeeperError is a call's failure as the keeper reported it; its text is
// the keeper's own (the server's error as a cold call would have it).
type KeeperError struct {
	Msg       string
	Cancelled bool
}

func (e *KeeperError) Error() string { return e.Msg }

// Is makes a cancelled call's error match ErrCancelled.
func (e *KeeperError) Is(target error) bool { return e.Cancelled && target == ErrCancelled }

// DialKeeper connects to the keeper at path and checks that it may be
// used: the peer runs as our uid (SO_PEERCRED), speaks KeeperProtocol and
// keeps exactly spec: the same server name, the same entry digest
// (EntryDigest) and the same directory. Anything else is an error: a stale
// socket, another user's, or a keeper of another entry is never used.
func DialKeeper(path string, spec KeeperSpec) (*KeeperConn, error) {
	conn, err := dialUnix(path)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) (*KeeperConn, error) {
		conn.Close()
		return nil, fmt.Errorf("keeper %s: "+format, append([]any{path}, args...)...)
	}
	_, uid, err := PeerCred(conn)
	if err != nil {
		return fail("%v", err)
	}
	if uid != os.Geteuid() {
		return fail("runs as uid %d, not ours", uid)
	}
	_ = conn.SetReadDeadline(time.Now().Add(keeperHelloWait))
	r := bufio.NewReaderSize(conn, 64<<10)
	line, err := readLine(r, 4096)
	if err != nil {
		return fail("no hello: %v", err)
	}
	var h keeperHello
	if err := json.Unmarshal(line, &h); err != nil {
		return fail("malformed hello: %v", err)
	}
	if h.Keeper != KeeperProtocol || h.Server != spec.Name || h.Entry != EntryDigest(spec.Server) || h.Cwd != spec.Cwd {
		return fail("keeps another server (protocol %d, server %q, entry %s, directory %q)", h.Keeper, h.Server, h.Entry, h.Cwd)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return &KeeperConn{conn: conn, r: r, name: spec.Name, pid: h.Pid}, nil
}

// Pid is the keeper's pid, as its hello says.
func (k *KeeperConn) Pid() int { return k.pid }

// Close closes the connection (cancelling a call still under way).
func (k *KeeperConn) Close() error { return k.conn.Close() }

// Call is CallToolContext through the keeper: when ctx ends first the
// keeper is asked to cancel the call (it sends the server
// notifications/cancelled for it) and the error wraps ErrCancelled.
func (k *KeeperConn) Call(ctx context.Context, tool string, arguments json.RawMessage, onProgress func(Progress)) (*CallResult, error) {
	if len(arguments) == 0 {
		arguments = json.RawMessage("{}")
	}
	gone := func(err error) (*CallResult, error) {
		return nil, &Error{Server: k.name, Op: "tools/call", Err: fmt.Errorf("the server's keeper went away: %v", err)}
	}
	_ = k.conn.SetWriteDeadline(time.Now().Add(keeperWriteWait))
	if _, err := k.conn.Write(encodeFrame(keeperCall{Tool: tool, Arguments: arguments, Progress: onProgress != nil})); err != nil {
		return gone(err)
	}
	// The answer is read here; a watcher turns ctx's end into a cancel
	// line and a deadline for the keeper's answer.
	finished := make(chan struct{})
	defer close(finished)
	var cancelled atomic.Bool
	go func() {
		select {
		case <-ctx.Done():
			cancelled.Store(true)
			_ = k.conn.SetWriteDeadline(time.Now().Add(keeperCancelWait))
			_, _ = k.conn.Write(encodeFrame(keeperCall{Cancel: true}))
			_ = k.conn.SetReadDeadline(time.Now().Add(keeperCancelWait))
		case <-finished:
		}
	}()
	for {
		line, err := readLine(k.r, maxKeeperLine)
		var rep keeperReply
		if err == nil {
			if jerr := json.Unmarshal(line, &rep); jerr != nil {
				err = fmt.Errorf("malformed answer: %v", jerr)
			}
		}
		switch {
		case cancelled.Load() && (err != nil || rep.Progress == nil):
			// Asked to stop: the keeper's answer (it told the server),
			// or none in time; whatever came, the call was cancelled.
			return nil, &Error{Server: k.name, Op: "tools/call", Err: ErrCancelled}
		case err != nil:
			return gone(err)
		case rep.Progress != nil:
			if onProgress != nil {
				onProgress(*rep.Progress)
			}
			continue
		case rep.Error != "":
			return nil, &KeeperError{Msg: rep.Error, Cancelled: rep.Cancelled}
		case rep.Result == nil:
			return gone(errors.New("an answer without a result"))
		}
		return &CallResult{Content: rep.Result.Content, Structured: rep.Result.Structured, IsError: rep.Result.IsError}, nil
	}
}

// PeerCred is the pid (in our pid namespace; 0 outside it) and uid of
// the process at the other end of conn, as the kernel recorded them when
// the connection was made.
func PeerCred(conn *net.UnixConn) (pid, uid int, err error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, -1, err
	}
	if cerr != nil {
		return 0, -1, fmt.Errorf("SO_PEERCRED: %v", cerr)
	}
	return int(cred.Pid), int(cred.Uid), nil
}

// descendsFrom reports whether pid is ancestor or lies below it, walking
// the parent chain in /proc (at most 256 steps).
func descendsFrom(pid, ancestor int) bool {
	for i := 0; i < 256 && pid > 0; i++ {
		if pid == ancestor {
			return true
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 {
			return false
		}
		if pid, err = strconv.Atoi(f[1]); err != nil {
			return false
		}
	}
	return false
}

// ListenKeeper binds and listens on a unix stream socket at path, which
// must not exist. The socket is not removed when the listener closes.
func ListenKeeper(path string) (*net.UnixListener, error) {
	p, done, err := socketAddress(path)
	if err != nil {
		return nil, err
	}
	defer done()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	return ln, nil
}

func dialUnix(path string) (*net.UnixConn, error) {
	p, done, err := socketAddress(path)
	if err != nil {
		return nil, err
	}
	defer done()
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: p, Net: "unix"})
}

// maxSocketPath is the longest path a sockaddr_un holds (with its NUL).
const maxSocketPath = 107

// socketAddress is path, or, when it is too long for a socket address,
// /proc/self/fd/N/NAME through a descriptor of its directory, valid until
// done is called.
func socketAddress(path string) (string, func(), error) {
	if len(path) <= maxSocketPath {
		return path, func() {}, nil
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, &os.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path)), func() { unix.Close(fd) }, nil
}

// readLine reads one newline-terminated line of at most max bytes (the
// newline excluded).
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			return nil, fmt.Errorf("line exceeds %d bytes", max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
