package mcpstdio

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeHandler struct {
	tools []ServedTool
	calls []string
}

func (h *fakeHandler) Tools() ([]ServedTool, error) { return h.tools, nil }

func (h *fakeHandler) Call(ctx context.Context, tool ServedTool, args json.RawMessage, progress func(Progress)) (ToolResult, error) {
	h.calls = append(h.calls, tool.Name+" "+string(args))
	if tool.Name == "bad" {
		return ToolResult{Content: []json.RawMessage{TextBlock("it broke")}, IsError: true}, nil
	}
	return ToolResult{Content: []json.RawMessage{TextBlock("ran " + tool.Name)}}, nil
}

// serve runs Serve over the given input lines and returns the output lines.
func serve(t *testing.T, h Handler, opts ServeOptions, lines ...string) []string {
	t.Helper()
	var out strings.Builder
	if err := Serve(strings.NewReader(strings.Join(lines, "\n")+"\n"), &out, h, opts); err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(out.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func tools(n int) []ServedTool {
	var ts []ServedTool
	for i := 0; i < n; i++ {
		ts = append(ts, ServedTool{Name: fmt.Sprintf("t%d", i), Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	return ts
}

func TestServeProtocol(t *testing.T) {
	h := &fakeHandler{tools: append(tools(3), ServedTool{Name: "bad", InputSchema: json.RawMessage(`{"type":"object"}`)})}
	tests := []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{}}}`,
			`{"id":1,"jsonrpc":"2.0","result":{"capabilities":{"tools":{"listChanged":true}},"protocolVersion":"2024-11-05","serverInfo":{"name":"ctx","version":"0"}}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`, `"protocolVersion":"2025-11-25"`},
		{`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2024-10-07"}}`, `"protocolVersion":"2025-11-25"`},
		{`{"jsonrpc":"2.0","id":"s","method":"ping"}`, `{"id":"s","jsonrpc":"2.0","result":{}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{}}`, `{"error":{"code":-32601,"message":"Method not found"},"id":4,"jsonrpc":"2.0"}`},
		{`{"jsonrpc":"2.0","id":5,"method":"resources/list"}`, `"code":-32601`},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`, `{"id":6,"jsonrpc":"2.0","result":{"nextCursor":"2","tools":[{"name":"t0","description":"d","inputSchema":{"type":"object"}},{"name":"t1","description":"d","inputSchema":{"type":"object"}}]}}`},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"2"}}`, `{"id":7,"jsonrpc":"2.0","result":{"tools":[{"name":"t2","description":"d","inputSchema":{"type":"object"}},{"name":"bad","inputSchema":{"type":"object"}}]}}`},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"cursor":"02"}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"cursor":"99"}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"t1","arguments":{"a":1}}}`, `{"id":10,"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"ran t1"}],"isError":false}}`},
		{`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"bad"}}`, `"result":{"content":[{"type":"text","text":"it broke"}],"isError":true}`},
		{`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"nope"}}`, `{"error":{"code":-32602,"message":"Unknown tool: nope"},"id":12,"jsonrpc":"2.0"}`},
		{`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"t1","arguments":[1]}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":14,"method":"tools/call"}`, `"code":-32602`},
		{`not json`, `{"error":{"code":-32700,"message":"Parse error"},"id":null,"jsonrpc":"2.0"}`},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `{"error":{"code":-32600,"message":"Invalid Request"},"id":null,"jsonrpc":"2.0"}`},
		{`{"jsonrpc":"1.0","id":15,"method":"ping"}`, `"code":-32600`},
	}
	for _, tc := range tests {
		out := serve(t, h, ServeOptions{PageSize: 2}, tc.in)
		if len(out) != 1 || !strings.Contains(out[0], tc.want) {
			t.Errorf("%s\n got %q\nwant %s", tc.in, out, tc.want)
		}
	}
	if fmt.Sprint(h.calls) != `[t1 {"a":1} bad {}]` {
		t.Errorf("calls %q", h.calls)
	}
}

func TestServeIgnoresNotificationsAndResponses(t *testing.T) {
	out := serve(t, &fakeHandler{}, ServeOptions{},
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		`{"jsonrpc":"2.0","id":99,"result":{}}`,
		``,
	)
	if len(out) != 0 {
		t.Fatalf("replied %q", out)
	}
}

func TestServeOversizedFrame(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", MaxFrame) + `"}}`
	out := serve(t, &fakeHandler{}, ServeOptions{}, big, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if len(out) != 2 || !strings.Contains(out[0], `"code":-32600`) || out[1] != `{"id":2,"jsonrpc":"2.0","result":{}}` {
		t.Fatalf("%q", out)
	}
}

// liveServer runs Serve on pipes, for exchanges that need the server's
// answer before the next line (notifications it sends on its own).
type liveServer struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func startLive(t *testing.T, h Handler, opts ServeOptions) *liveServer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	l := &liveServer{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := Serve(inR, outW, h, opts)
		outW.Close()
		l.done <- err
	}()
	t.Cleanup(func() { inW.Close() })
	return l
}

func (l *liveServer) send(line string) {
	l.t.Helper()
	if _, err := io.WriteString(l.in, line+"\n"); err != nil {
		l.t.Fatal(err)
	}
}

// next returns the server's next line, failing after a few seconds.
func (l *liveServer) next() string {
	l.t.Helper()
	got := make(chan string, 1)
	go func() {
		s, _ := l.out.ReadString('\n')
		got <- strings.TrimSuffix(s, "\n")
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(5 * time.Second):
		l.t.Fatal("no line from the server within 5s")
		return ""
	}
}

// changingHandler's tool set is whatever the test sets it to; "slow"
// reports progress and waits for cancellation.
type changingHandler struct {
	mu        sync.Mutex
	tools     []ServedTool
	cancelled chan string
}

func (h *changingHandler) Tools() ([]ServedTool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ServedTool{}, h.tools...), nil
}

func (h *changingHandler) set(ts []ServedTool) {
	h.mu.Lock()
	h.tools = ts
	h.mu.Unlock()
}

func (h *changingHandler) Call(ctx context.Context, tool ServedTool, args json.RawMessage, progress func(Progress)) (ToolResult, error) {
	switch tool.Name {
	case "slow":
		total := 3.0
		if progress != nil {
			progress(Progress{Progress: 1, Total: &total, Message: "one"})
			progress(Progress{Progress: 1, Total: &total}) // not increasing: dropped
			progress(Progress{Progress: 2, Total: &total})
		}
		<-ctx.Done()
		h.cancelled <- string(args)
		return ToolResult{}, nil
	case "rich":
		return ToolResult{Content: []json.RawMessage{json.RawMessage(`{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}`)},
			Structured: json.RawMessage(`{"sum":3}`)}, nil
	}
	return ToolResult{Content: []json.RawMessage{TextBlock("ran " + tool.Name)}}, nil
}

func (h *changingHandler) Unlisted(name string, before bool) (ToolResult, bool) {
	if name == "revoked" {
		return ToolResult{Content: []json.RawMessage{TextBlock("revoked: EACCES: permission denied (agent-policy): no rule")}, IsError: true}, true
	}
	return ToolResult{}, false
}

func TestServeListChanged(t *testing.T) {
	h := &changingHandler{tools: tools(2)}
	l := startLive(t, h, ServeOptions{PollInterval: 20 * time.Millisecond})
	l.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	if got := l.next(); !strings.Contains(got, `"listChanged":true`) {
		t.Fatalf("initialize: %s", got)
	}
	// Before the first listing a change is nothing to announce.
	h.set(tools(3))
	time.Sleep(100 * time.Millisecond)
	l.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := l.next(); !strings.Contains(got, `"id":2`) || !strings.Contains(got, `"t2"`) {
		t.Fatalf("list: %s", got)
	}
	// A change after it is announced by the poll, once.
	h.set(tools(1))
	if got := l.next(); got != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` {
		t.Fatalf("expected list_changed, got %s", got)
	}
	time.Sleep(100 * time.Millisecond)
	l.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if got := l.next(); got != `{"id":3,"jsonrpc":"2.0","result":{}}` {
		t.Fatalf("a second announcement or no pong: %s", got)
	}
	// A changed description is a change too; a call finds it before the poll.
	l.send(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	l.next()
	changed := tools(1)
	changed[0].Annotations = json.RawMessage(`{"readOnlyHint":true}`)
	h.set(changed)
	l.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t0"}}`)
	first, second := l.next(), l.next()
	if first != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` || !strings.Contains(second, `"id":5`) {
		t.Fatalf("call after a change: %s / %s", first, second)
	}
}

func TestServeProgressCancelAndResults(t *testing.T) {
	h := &changingHandler{tools: append(tools(1), ServedTool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		ServedTool{Name: "rich", InputSchema: json.RawMessage(`{"type":"object"}`)}), cancelled: make(chan string, 1)}
	l := startLive(t, h, ServeOptions{PollInterval: -1})
	l.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"n":1},"_meta":{"progressToken":"tok"}}}`)
	for _, want := range []string{
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"message":"one","progress":1,"progressToken":"tok","total":3}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":2,"progressToken":"tok","total":3}}`,
	} {
		if got := l.next(); got != want {
			t.Fatalf("progress:\n got %s\nwant %s", got, want)
		}
	}
	l.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"bored"}}`)
	select {
	case args := <-h.cancelled:
		if args != `{"n":1}` {
			t.Fatalf("cancelled call had %s", args)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call was not cancelled")
	}
	// No response to the cancelled call: the next line answers the next request.
	l.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"rich"}}`)
	if got := l.next(); got != `{"id":2,"jsonrpc":"2.0","result":{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"isError":false,"structuredContent":{"sum":3}}}` {
		t.Fatalf("rich: %s", got)
	}
	// A tool the handler knows but does not offer: a tool result, not -32602.
	l.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"revoked"}}`)
	if got := l.next(); got != `{"id":3,"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"revoked: EACCES: permission denied (agent-policy): no rule"}],"isError":true}}` {
		t.Fatalf("revoked: %s", got)
	}
	l.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"never"}}`)
	if got := l.next(); !strings.Contains(got, `"code":-32602`) {
		t.Fatalf("unknown: %s", got)
	}
	l.in.Close()
	if err := <-l.done; err != nil {
		t.Fatal(err)
	}
}
