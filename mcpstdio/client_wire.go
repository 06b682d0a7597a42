package mcpstdio

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"time"
)

// The session's wire: the reader that matches responses to requests and
// routes progress, the one writer, and what a dead session says.

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

// notSent marks a request that never reached the server (writing it
// failed): it may be sent again, to a new server, without doing anything
// twice. Its text is the error's own.
type notSent struct{ error }

func (n notSent) Unwrap() error { return n.error }
