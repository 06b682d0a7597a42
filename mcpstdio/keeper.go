package mcpstdio

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"
	"time"
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
		progress, written, onProgress = progressWriter(conn)
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

// progressWriter relays a call's progress to conn from a goroutine of its
// own: the shared session's reader hands progress over and never waits
// for a caller. done is closed once progress is closed and drained; a
// write that fails drops the rest.
func progressWriter(conn *net.UnixConn) (progress *replies, done chan struct{}, onProgress func(Progress)) {
	progress = &replies{ch: make(chan []byte, 64)}
	done = make(chan struct{})
	go func() {
		defer close(done)
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
	return progress, done, func(p Progress) { progress.send(encodeFrame(keeperReply{Progress: &p})) }
}
