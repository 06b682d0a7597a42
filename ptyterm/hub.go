package ptyterm

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Limits of the live side of a terminal.
const (
	// ScrollbackSize is how much recent output a joining client receives
	// before live output.
	ScrollbackSize = 64 << 10
	// maxClientQueue bounds the output queued for one client. A client that
	// falls this far behind is disconnected; the PTY and the other clients
	// never wait for it.
	maxClientQueue = 4 << 20
	// MaxClients bounds the clients connected at once (watchers and the
	// attacher together).
	MaxClients = 16
	// exitFlushTimeout is how long each client may take to receive its
	// queued output once the command has exited.
	exitFlushTimeout = 2 * time.Second
	// streamBatch is the pace at which streaming output is delivered to
	// the clients, the record and the console (see deliverOutput).
	streamBatch = time.Millisecond
	// escapeWait is how long a held partial in-band marker (often just an
	// Escape key press) waits for the bytes that would complete it.
	escapeWait = 50 * time.Millisecond
)

// refusal is why a client was turned away: sent to it as one line
// "ctxterm: REASON: TEXT\n", then the connection is closed.
type refusal struct{ reason, text string }

func (r *refusal) line() []byte { return []byte("ctxterm: " + r.reason + ": " + r.text + "\n") }

var (
	refuseBusy    = &refusal{"busy", "another client is attached (watch instead, or wait for it to detach)"}
	refuseLimit   = &refusal{"limit", "too many clients"}
	refuseExiting = &refusal{"exiting", "the command has exited"}
)

// hub is the live side of one terminal: it fans PTY output out to the
// clients and the scrollback, and owns the single attach slot. hub.mu
// orders output against joins, so a new client receives the scrollback and
// then every later byte, none twice and none missing.
type hub struct {
	pty *os.File
	rec *recorder

	mu       sync.Mutex
	scroll   *scrollback
	clients  map[*client]struct{}
	attacher *client
	console  bool // the local console holds the attach slot
	closed   bool
	size     Winsize
	wg       sync.WaitGroup
}

func newHub(pty *os.File, rec *recorder, size Winsize) *hub {
	return &hub{pty: pty, rec: rec, scroll: newScrollback(ScrollbackSize), clients: map[*client]struct{}{}, size: size}
}

// client is one socket connection after its mode line was accepted. Two
// goroutines serve it: writeLoop sends queued output, readLoop reads input
// (attach: to the PTY; watch: discarded) and notices the client leaving.
type client struct {
	h    *hub
	conn *net.UnixConn
	mode Mode
	uid  int
	pid  int

	mu      sync.Mutex
	queue   []chunk // each holds its slab
	queued  int
	closing bool // the command exited: send what is queued, then close
	gone    bool
	wake    chan struct{}
	leave1  sync.Once
}

// Broadcast hands PTY output to the scrollback and every client. out must
// not be modified afterwards: the clients' queues share it, each holding
// its slab until the output is sent.
func (h *hub) Broadcast(out chunk) {
	var drop []*client
	h.mu.Lock()
	h.scroll.add(out)
	if len(h.clients) > 0 {
		for c := range h.clients {
			if !c.enqueue(out) {
				drop = append(drop, c)
			}
		}
	}
	h.mu.Unlock()
	for _, c := range drop {
		c.leave("overflow")
	}
}

// join admits c, queueing the scrollback as its first output, and starts
// serving it. rest holds input that arrived behind the mode line.
func (h *hub) join(c *client, rest []byte) *refusal {
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		return refuseExiting
	case len(h.clients) >= MaxClients:
		h.mu.Unlock()
		return refuseLimit
	case c.mode == Attach && (h.attacher != nil || h.console):
		h.mu.Unlock()
		return refuseBusy
	}
	c.h, c.wake = h, make(chan struct{}, 1)
	if snap := h.scroll.Snapshot(); len(snap) > 0 {
		c.queue, c.queued = []chunk{{p: snap}}, len(snap)
	}
	h.clients[c] = struct{}{}
	if c.mode == Attach {
		h.attacher = c
	}
	h.wg.Add(2)
	h.mu.Unlock()

	typ := EventWatch
	if c.mode == Attach {
		typ = EventAttach
	}
	uid := c.uid
	h.rec.Event(Event{Type: typ, UID: &uid, PID: c.pid})
	go c.writeLoop()
	go c.readLoop(rest)
	return nil
}

// claimConsole gives the attach slot to the local console.
func (h *hub) claimConsole() {
	h.mu.Lock()
	h.console = true
	h.mu.Unlock()
}

// releaseConsole frees the attach slot when the local console's input ends.
func (h *hub) releaseConsole() {
	h.mu.Lock()
	h.console = false
	h.mu.Unlock()
}

// Resize applies a window size request and records it; a request for the
// current size does nothing.
func (h *hub) Resize(ws Winsize) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ws == h.size || h.closed {
		return
	}
	if err := setWinsize(h.pty, ws.Rows, ws.Cols); err != nil {
		return
	}
	h.size = ws
	h.rec.Event(Event{Type: EventResize, Rows: ws.Rows, Cols: ws.Cols})
}

// shutdown gives every client exitFlushTimeout to receive its queued
// output, closes them all and waits until they are gone. The PTY must be
// closed first, so that no reader is left blocked writing input to it.
func (h *hub) shutdown() {
	h.mu.Lock()
	h.closed = true
	h.scroll.release() // no output and no join follow
	var cs []*client
	for c := range h.clients {
		cs = append(cs, c)
	}
	h.mu.Unlock()
	deadline := time.Now().Add(exitFlushTimeout)
	for _, c := range cs {
		_ = c.conn.SetWriteDeadline(deadline) // best effort
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		c.poke()
	}
	h.wg.Wait()
}

func (c *client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// enqueue adds out to c's queue, holding its slab, or reports false when
// c has fallen maxClientQueue bytes behind.
func (c *client) enqueue(out chunk) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return true
	}
	if c.queued+len(out.p) > maxClientQueue {
		return false
	}
	out.ref()
	c.queue = append(c.queue, out)
	c.queued += len(out.p)
	c.poke()
	return true
}

func (c *client) writeLoop() {
	defer c.h.wg.Done()
	var (
		q    []chunk     // taken from c.queue; its backing array is reused
		bufs net.Buffers // q's bytes for one writev
	)
	for {
		c.mu.Lock()
		q, c.queue = c.queue, q[:0]
		c.queued = 0
		closing, gone := c.closing, c.gone
		c.mu.Unlock()
		if gone {
			release(q)
			return
		}
		if len(q) == 0 {
			if closing {
				c.leave("exit")
				return
			}
			<-c.wake
			continue
		}
		bufs = bufs[:0]
		for _, out := range q {
			bufs = append(bufs, out.p)
		}
		// WriteTo consumes the slice it is given, not the array.
		send := bufs
		_, err := send.WriteTo(c.conn)
		clear(bufs)
		release(q)
		if err != nil {
			c.leave("error")
			return
		}
	}
}

func (c *client) readLoop(rest []byte) {
	defer c.h.wg.Done()
	var (
		f   winsizeFilter
		in  []byte
		buf = make([]byte, 4096)
	)
	input := func(p []byte, release bool) {
		var sizes []Winsize
		in, sizes = f.Filter(in[:0], p)
		if release {
			in = f.Release(in)
		}
		for _, ws := range sizes {
			c.h.Resize(ws)
		}
		if len(in) > 0 {
			_, _ = c.h.pty.Write(in) // fails only once the PTY is closed
		}
	}
	if c.mode == Attach && len(rest) > 0 {
		input(rest, false)
	}
	for {
		if c.mode == Attach {
			var deadline time.Time
			if f.HoldsPrefix() {
				deadline = time.Now().Add(escapeWait)
			}
			_ = c.conn.SetReadDeadline(deadline)
		}
		n, err := c.conn.Read(buf)
		if c.mode == Attach && n > 0 {
			input(buf[:n], false)
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				input(nil, true)
				continue
			}
			reason := "error"
			if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
				reason = "eof"
			}
			c.leave(reason)
			return
		}
	}
}

// leave disconnects c once: it frees its slot, closes the connection and
// records terminal.detach with why (eof, error, overflow, exit).
func (c *client) leave(reason string) {
	c.leave1.Do(func() {
		h := c.h
		h.mu.Lock()
		delete(h.clients, c)
		if h.attacher == c {
			h.attacher = nil
		}
		h.mu.Unlock()
		c.mu.Lock()
		if c.closing {
			reason = "exit"
		}
		release(c.queue)
		c.gone, c.queue, c.queued = true, nil, 0
		c.mu.Unlock()
		_ = c.conn.Close() // unblocks both loops
		c.poke()
		uid := c.uid
		h.rec.Event(Event{Type: EventDetach, Mode: c.mode.String(), UID: &uid, PID: c.pid, Reason: reason})
	})
}
