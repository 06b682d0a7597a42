package mcpstdio

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"
)

// ServedTool is one tool a server lists. Input is how the handler passes
// the tool its arguments; it is not sent to the client.
type ServedTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Input        string          `json:"-"`
}

// ToolResult is what a served tool call returns: the MCP result fields.
type ToolResult struct {
	Content    []json.RawMessage
	Structured json.RawMessage // structuredContent; nil when absent
	IsError    bool
}

// TextBlock returns a text content block.
func TextBlock(text string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", text})
	return b
}

// Handler supplies a server's tools. Tools is asked on every tools/list,
// before every call (to find the tool: a tool removed or no longer
// permitted disappears at once) and by the list-change poll; the slice it
// returns is not modified afterwards (a handler may return the same one
// while its tools are unchanged, and the server then reuses what it
// computed of it). Call runs one
// tool; ctx is cancelled when the client sends notifications/cancelled for
// that request. progress is nil unless the client asked for progress
// (params._meta.progressToken); each call of it becomes one
// notifications/progress to the client.
type Handler interface {
	Tools() ([]ServedTool, error)
	Call(ctx context.Context, tool ServedTool, arguments json.RawMessage, progress func(Progress)) (ToolResult, error)
}

// Refuser is a Handler that records the calls the server refuses before
// any tool runs (an unknown tool), so that every call leaves a record.
type Refuser interface {
	Refused(name, reason string)
}

// Unlister is a Handler that can account for a tool it does not list: a
// tool it knows but may not offer (one whose permission was revoked, a
// terminal-only tool) gets ok and a result (isError and the refusal, never
// a protocol error), recorded by the handler; a name it does not know at
// all gets ok false and the server answers -32602 "Unknown tool".
type Unlister interface {
	Unlisted(name string, listedBefore bool) (ToolResult, bool)
}

// ServeOptions tunes Serve; zero values mean the defaults.
type ServeOptions struct {
	PageSize      int    // tools per tools/list page, default 100
	MaxConcurrent int    // tools/call run at once, default 4
	Name          string // serverInfo.name, default "ctx"
	Version       string // serverInfo.version
	// PollInterval is how often the tool set is compared with the one the
	// client last listed, for notifications/tools/list_changed; default
	// DefaultPollInterval, negative: only before each tools/call.
	PollInterval time.Duration
	// Stop, when closed, cancels every call in progress as a client's
	// notifications/cancelled would (a server told to terminate ends its
	// calls' work instead of leaving it behind).
	Stop <-chan struct{}
}

// DefaultPollInterval is how often Serve looks for a changed tool set
// while the client is idle.
const DefaultPollInterval = 2 * time.Second

// Serve runs an MCP server on in/out until in reaches EOF, then waits for
// calls in progress and returns. It answers initialize (with the client's
// version when that is one of StableVersions, else AdvertisedVersion),
// ping, tools/list (paged, nextCursor) and tools/call; every other request
// gets -32601 "Method not found" (clients probing newer methods, such as
// server/discover, need an answer to fall back), and notifications are
// ignored except notifications/cancelled, which cancels that call (and its
// response is not sent). Malformed frames get a -32700 or -32600 error with
// a null id. At EOF, calls still running are waited for and answered.
//
// It advertises tools.listChanged: once the client has listed the tools,
// the set is compared with what it was sent (every PollInterval, and
// before each tools/call), and a change (a tool added, removed, revoked or
// described differently) is announced with one
// notifications/tools/list_changed until the client lists again.
func Serve(in io.Reader, out io.Writer, h Handler, opts ServeOptions) error {
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 4
	}
	if opts.Name == "" {
		opts.Name = "ctx"
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	s := &server{out: out, h: h, opts: opts, sem: make(chan struct{}, opts.MaxConcurrent),
		inflight: map[string]context.CancelFunc{}, listed: map[string]bool{}}
	stop := make(chan struct{})
	if opts.Stop != nil {
		go func() {
			select {
			case <-opts.Stop:
				s.imu.Lock()
				for _, cancel := range s.inflight {
					cancel()
				}
				s.imu.Unlock()
			case <-stop:
			}
		}()
	}
	var pollDone sync.WaitGroup
	if opts.PollInterval > 0 {
		pollDone.Add(1)
		go func() {
			defer pollDone.Done()
			s.poll(stop)
		}()
	}
	r := bufio.NewReaderSize(in, 64<<10)
	var err error
	for {
		var frame []byte
		frame, err = readFrame(r)
		if errors.Is(err, ErrFrameTooLarge) {
			s.replyError(nil, codeInvalidRequest, "frame exceeds 1 MiB")
			continue
		}
		if err != nil {
			break
		}
		if len(frame) == 0 {
			continue
		}
		s.handle(frame)
	}
	s.wg.Wait()
	close(stop)
	pollDone.Wait()
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return s.writeErr
	}
	return err
}

type server struct {
	out      io.Writer
	h        Handler
	opts     ServeOptions
	wmu      sync.Mutex
	writeErr error
	wg       sync.WaitGroup
	sem      chan struct{}
	imu      sync.Mutex
	inflight map[string]context.CancelFunc // request id -> cancel, for tools/call

	// lmu guards the list-change state: the fingerprint of the set the
	// client was last sent ("" before its first tools/list), the one last
	// announced as changed, and every name ever listed to it.
	lmu       sync.Mutex
	sent      string
	announced string
	listed    map[string]bool

	// fmu guards the fingerprint of the last set compared (fingerprintOf).
	fmu     sync.Mutex
	fpTools []ServedTool
	fp      string
}

func (s *server) send(v any) {
	frame := encodeFrame(v)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.writeErr != nil {
		return
	}
	if _, err := s.out.Write(frame); err != nil {
		s.writeErr = err
	}
}

func (s *server) reply(id json.RawMessage, result any) {
	s.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (s *server) replyError(id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	s.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": &RPCError{Code: code, Message: msg}})
}

func (s *server) handle(frame []byte) {
	var probe any
	if err := json.Unmarshal(frame, &probe); err != nil {
		s.replyError(nil, codeParseError, "Parse error")
		return
	}
	if _, isObj := probe.(map[string]any); !isObj {
		// Batches were removed from MCP in 2025-06-18.
		s.replyError(nil, codeInvalidRequest, "Invalid Request")
		return
	}
	m, err := parseMessage(frame)
	if err != nil {
		s.replyError(nil, codeInvalidRequest, "Invalid Request")
		return
	}
	if m.isNotification() && m.Method == "notifications/cancelled" {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			s.imu.Lock()
			if cancel, ok := s.inflight[string(p.RequestID)]; ok {
				cancel()
			}
			s.imu.Unlock()
		}
		return
	}
	if !m.isRequest() {
		return // other notifications, and responses to requests we never send
	}
	switch m.Method {
	case "initialize":
		s.initialize(m)
	case "ping":
		s.reply(m.ID, struct{}{})
	case "tools/list":
		s.list(m)
	case "tools/call":
		ctx, cancel := context.WithCancel(context.Background())
		s.imu.Lock()
		s.inflight[string(m.ID)] = cancel
		s.imu.Unlock()
		s.sem <- struct{}{}
		s.wg.Add(1)
		go func() {
			defer func() {
				s.imu.Lock()
				delete(s.inflight, string(m.ID))
				s.imu.Unlock()
				cancel()
				<-s.sem
				s.wg.Done()
			}()
			s.call(ctx, m)
		}()
	default:
		s.replyError(m.ID, codeMethodNotFound, "Method not found")
	}
}

func (s *server) initialize(m *message) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(m.Params, &p) // a missing or odd version gets ours
	v := AdvertisedVersion
	if isStable(p.ProtocolVersion) {
		v = p.ProtocolVersion
	}
	info := map[string]string{"name": s.opts.Name, "version": s.opts.Version}
	if info["version"] == "" {
		info["version"] = "0"
	}
	s.reply(m.ID, map[string]any{
		"protocolVersion": v,
		"capabilities":    map[string]any{"tools": map[string]bool{"listChanged": true}},
		"serverInfo":      info,
	})
}

func (s *server) list(m *message) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if len(m.Params) > 0 && json.Unmarshal(m.Params, &p) != nil {
		s.replyError(m.ID, codeInvalidParams, "Invalid params")
		return
	}
	tools, err := s.h.Tools()
	if err != nil {
		s.replyError(m.ID, codeInternalError, err.Error())
		return
	}
	start := 0
	if p.Cursor != nil {
		n, err := strconv.Atoi(*p.Cursor)
		if err != nil || n < 0 || n > len(tools) || strconv.Itoa(n) != *p.Cursor {
			s.replyError(m.ID, codeInvalidParams, "Invalid params: unknown cursor")
			return
		}
		start = n
	}
	end := start + s.opts.PageSize
	if end > len(tools) {
		end = len(tools)
	}
	page := tools[start:end]
	if page == nil {
		page = []ServedTool{}
	}
	res := map[string]any{"tools": page}
	if end < len(tools) {
		res["nextCursor"] = strconv.Itoa(end)
	}
	if p.Cursor == nil {
		// A listing starts over: this set is what the client now knows.
		s.noteListed(tools)
	} else {
		s.lmu.Lock()
		for _, t := range page {
			s.listed[t.Name] = true
		}
		s.lmu.Unlock()
	}
	s.reply(m.ID, res)
}

// progressRelay turns a handler's progress reports into
// notifications/progress carrying the client's token: only increasing
// values (MCP requires it), and none once the response is on its way.
type progressRelay struct {
	s     *server
	token json.RawMessage
	mu    sync.Mutex
	last  *float64
	ended bool
}

func (r *progressRelay) report(p Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended || (r.last != nil && p.Progress <= *r.last) {
		return
	}
	v := p.Progress
	r.last = &v
	params := map[string]any{"progressToken": r.token, "progress": p.Progress}
	if p.Total != nil {
		params["total"] = *p.Total
	}
	if p.Message != "" {
		params["message"] = p.Message
	}
	r.s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
}

func (r *progressRelay) end() {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
}

func (s *server) call(ctx context.Context, m *message) {
	var p struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if len(m.Params) == 0 || json.Unmarshal(m.Params, &p) != nil || p.Name == nil {
		s.replyError(m.ID, codeInvalidParams, "Invalid params: tools/call needs a name")
		return
	}
	args := p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if args[0] != '{' {
		s.replyError(m.ID, codeInvalidParams, "Invalid params: arguments must be an object")
		return
	}
	tools, err := s.h.Tools()
	if err != nil {
		s.replyError(m.ID, codeInternalError, err.Error())
		return
	}
	s.compare(tools)
	var tool *ServedTool
	for i := range tools {
		if tools[i].Name == *p.Name {
			tool = &tools[i]
			break
		}
	}
	if tool == nil {
		s.lmu.Lock()
		before := s.listed[*p.Name]
		s.lmu.Unlock()
		if u, ok := s.h.(Unlister); ok {
			if res, ok := u.Unlisted(*p.Name, before); ok {
				s.replyResult(m.ID, res)
				return
			}
		}
		if r, ok := s.h.(Refuser); ok {
			r.Refused(*p.Name, "unknown tool: not served to this client")
		}
		s.replyError(m.ID, codeInvalidParams, "Unknown tool: "+*p.Name)
		return
	}
	var relay *progressRelay
	var progress func(Progress)
	if t := p.Meta.ProgressToken; len(t) > 0 && (t[0] == '"' || t[0] == '-' || t[0] >= '0' && t[0] <= '9') {
		relay = &progressRelay{s: s, token: t}
		progress = relay.report
	}
	res, err := s.h.Call(ctx, *tool, args, progress)
	if relay != nil {
		relay.end()
	}
	if ctx.Err() != nil {
		return // cancelled by the client: no response is expected
	}
	if err != nil {
		s.replyError(m.ID, codeInternalError, err.Error())
		return
	}
	s.replyResult(m.ID, res)
}

func (s *server) replyResult(id json.RawMessage, res ToolResult) {
	content := res.Content
	if content == nil {
		content = []json.RawMessage{}
	}
	out := map[string]any{"content": content, "isError": res.IsError}
	if len(res.Structured) > 0 {
		out["structuredContent"] = res.Structured
	}
	s.reply(id, out)
}
