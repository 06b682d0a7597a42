package mcpstdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

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
//
// Its steps: register the request's id (register), send it (sendRequest),
// wait for its end (await).
func (c *Client) requestCtx(ctx context.Context, method string, params map[string]any, onProgress func(Progress)) (json.RawMessage, error) {
	id, ch, progressed := c.register(onProgress)
	defer c.unregister(id)
	if err := c.sendRequest(id, method, params, onProgress != nil); err != nil {
		return nil, c.requestErr(method, err)
	}
	return c.await(ctx, method, id, ch, progressed)
}

// requestErr is the error of request method. err is evaluated before
// the call: serverGone, when it is the cause, waits for stderr to drain.
func (c *Client) requestErr(method string, err error) error {
	return &Error{Server: c.name, Op: method, Err: err, Stderr: c.stderr.lastLine()}
}

// register takes the next request id and the channel its response comes
// on; with onProgress, also the route of its progress notifications, each
// of which signals progressed.
func (c *Client) register(onProgress func(Progress)) (id int64, ch chan *message, progressed chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	id = c.nextID
	ch = make(chan *message, 1)
	c.pending[id] = ch
	progressed = make(chan struct{}, 1)
	if onProgress != nil {
		c.progress[id] = func(p Progress) {
			onProgress(p)
			select {
			case progressed <- struct{}{}:
			default:
			}
		}
	}
	return id, ch, progressed
}

// unregister forgets request id: a late response or progress is dropped.
func (c *Client) unregister(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	delete(c.progress, id)
	c.mu.Unlock()
}

// sendRequest writes request id, asking for progress when withProgress
// (params then gets _meta.progressToken). A failed write is the dead
// session's error when the reader ends within 50 ms, and is notSent unless
// part of the request went out.
func (c *Client) sendRequest(id int64, method string, params map[string]any, withProgress bool) error {
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if withProgress {
		if params == nil {
			params = map[string]any{}
		}
		params["_meta"] = map[string]any{"progressToken": id}
	}
	if params != nil {
		req["params"] = params
	}
	err := c.write(encodeFrame(req))
	if err == nil {
		return nil
	}
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
		return mark(c.serverGone())
	case <-time.After(50 * time.Millisecond):
	}
	return mark(fmt.Errorf("writing request: %v", err))
}

// await waits for the end of request id: its response on ch, the end of
// the session, ctx's end or the timeout (restarted by progressed, up to
// MaxProgressWait); the last two send notifications/cancelled.
func (c *Client) await(ctx context.Context, method string, id int64, ch chan *message, progressed chan struct{}) (json.RawMessage, error) {
	fail := func(err error) (json.RawMessage, error) { return nil, c.requestErr(method, err) }
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
