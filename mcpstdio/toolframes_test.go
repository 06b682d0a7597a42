package mcpstdio

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"ctx/fsops/proc"
)

func runOf(stdout, stderr string, status int) *runResult {
	r := &runResult{stdout: &proc.Capped{Limit: MaxNativeOutput}, stderr: &proc.Capped{Limit: MaxCallOutput}, status: status}
	r.stdout.Write([]byte(stdout))
	r.stderr.Write([]byte(stderr))
	return r
}

func resultJSON(r ToolResult) string {
	b, _ := json.Marshal(map[string]any{"content": r.Content, "structuredContent": r.Structured, "isError": r.IsError})
	return string(b)
}

func TestToolResult(t *testing.T) {
	start := `{"type":"start","run":"r","tool":"x"}` + "\n"
	tests := []struct {
		name, stdout, stderr string
		status               int
		want                 string
	}{
		{"plain ok", "hello\n", "", 0, `{"content":[{"type":"text","text":"hello\n"}],"isError":false,"structuredContent":null}`},
		{"plain failure", "partial\n", "it broke\n", 3, `{"content":[{"type":"text","text":"partial\n"},{"type":"text","text":"it broke\n"}],"isError":true,"structuredContent":null}`},
		{"plain failure, silent", "", "", 3, `{"content":[{"type":"text","text":"x: exit status 3"}],"isError":true,"structuredContent":null}`},
		{"frames: blocks and structured content kept",
			start + `{"type":"message","run":"r","role":"tool","content":[{"type":"text","text":"an image"},{"type":"image","data":"iVBO","mimeType":"image/png"}],"structuredContent":{"a":1}}` + "\n" + `{"type":"done","run":"r","status":"ok"}` + "\n", "", 0,
			`{"content":[{"type":"text","text":"an image"},{"type":"image","data":"iVBO","mimeType":"image/png"}],"isError":false,"structuredContent":{"a":1}}`},
		{"frames: a denial adds its text, drops the empty block",
			start + `{"type":"message","run":"r","role":"tool","content":[{"type":"text","text":""}]}` + "\n" + `{"type":"error","run":"r","code":"EACCES","message":"permission denied (perm): no w"}` + "\n" + `{"type":"done","run":"r","status":"error"}` + "\n", "", 13,
			`{"content":[{"type":"text","text":"x: EACCES: permission denied (perm): no w"}],"isError":true,"structuredContent":null}`},
		{"frames: the remote error text is not repeated",
			start + `{"type":"message","run":"r","role":"tool","content":[{"type":"text","text":"it failed"}]}` + "\n" + `{"type":"error","run":"r","code":"EIO","message":"it failed"}` + "\n" + `{"type":"done","run":"r","status":"error"}` + "\n", "", 1,
			`{"content":[{"type":"text","text":"it failed"}],"isError":true,"structuredContent":null}`},
		{"frames: exit status without an error frame", start + `{"type":"done","run":"r","status":"error"}` + "\n", "oops\n", 2,
			`{"content":[{"type":"text","text":"oops\n"}],"isError":true,"structuredContent":null}`},
		{"frames: progress and unknown frames carry nothing", start + `{"type":"progress","run":"r","progress":1}` + "\n" + `{"type":"future","run":"r"}` + "\n" + `{"type":"done","run":"r","status":"ok"}` + "\n", "", 0,
			`{"content":null,"isError":false,"structuredContent":null}`},
		{"frames: a bad block", start + `{"type":"message","content":[{"text":"no type"}]}` + "\n", "", 0,
			`{"content":[{"type":"text","text":"x: EIO: malformed native output: line 2: field \"content[0]\" is not a content block"}],"isError":true,"structuredContent":null}`},
		{"frames: a line that is no frame", start + "garbage\n", "", 0,
			`{"content":[{"type":"text","text":"x: EIO: malformed native output: line 2: not a JSON object frame"}],"isError":true,"structuredContent":null}`},
		{"frames: structured content must be an object", start + `{"type":"message","content":[],"structuredContent":[1]}` + "\n", "", 0,
			`{"content":[{"type":"text","text":"x: EIO: malformed native output: line 2: field \"structuredContent\" is not an object"}],"isError":true,"structuredContent":null}`},
	}
	for _, tc := range tests {
		if got := resultJSON(toolResult("x", runOf(tc.stdout, tc.stderr, tc.status))); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	big := runOf("", "", 0)
	big.stdout.Limit = 4
	big.stdout.Write([]byte("12345"))
	if got := resultJSON(toolResult("x", big)); !strings.Contains(got, "EFBIG") {
		t.Errorf("oversized: %s", got)
	}
}

func TestProgressFrame(t *testing.T) {
	if p, ok := parseProgressFrame([]byte(`{"type":"progress","run":"r","progress":2,"total":4,"message":"half"}`)); !ok || p.Progress != 2 || *p.Total != 4 || p.Message != "half" {
		t.Fatalf("progress %+v %v", p, ok)
	}
	for _, bad := range []string{`{"type":"message","progress":1}`, `{"type":"progress"}`, `{"type":"progress","progress":"1"}`, `not json "progress"`} {
		if _, ok := parseProgressFrame([]byte(bad)); ok {
			t.Errorf("%s accepted", bad)
		}
	}
}

// FuzzToolFrames: whatever a tool writes, the mapping yields a result
// whose content blocks are objects with a type, whose structured content
// (when any) is an object, and which encodes.
func FuzzToolFrames(f *testing.F) {
	f.Add([]byte(`{"type":"start","run":"r","tool":"x"}`+"\n"+`{"type":"message","content":[{"type":"text","text":"a"}],"structuredContent":{"k":1}}`+"\n"+`{"type":"done","status":"ok"}`+"\n"), 0)
	f.Add([]byte(`{"type":"start"}`+"\n"+`{"type":"error","code":"EIO","message":"m"}`+"\n"), 1)
	f.Add([]byte("plain text\n"), 0)
	f.Fuzz(func(t *testing.T, data []byte, status int) {
		res := toolResult("x", runOf(string(data), "", status))
		for _, b := range res.Content {
			var blk struct {
				Type *string `json:"type"`
			}
			if json.Unmarshal(b, &blk) != nil || blk.Type == nil {
				t.Fatalf("content block %s", b)
			}
		}
		if res.Structured != nil && !bytes.HasPrefix(bytes.TrimSpace(res.Structured), []byte("{")) {
			t.Fatalf("structured %s", res.Structured)
		}
		if _, err := json.Marshal(map[string]any{"content": res.Content, "structuredContent": res.Structured}); err != nil {
			t.Fatalf("unencodable result: %v", err)
		}
	})
}
