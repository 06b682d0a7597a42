package mcpstdio

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

type fakeHandler struct {
	tools []ServedTool
	calls []string
}

func (h *fakeHandler) Tools() ([]ServedTool, error) { return h.tools, nil }

func (h *fakeHandler) Call(ctx context.Context, tool ServedTool, args json.RawMessage) (ToolResult, error) {
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
			`{"id":1,"jsonrpc":"2.0","result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2024-11-05","serverInfo":{"name":"ctx","version":"0"}}}`},
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
