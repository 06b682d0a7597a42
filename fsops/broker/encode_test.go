package broker

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeRequest is the host's reading of a request's bytes.
func decodeRequest(t *testing.T, b []byte) Request {
	t.Helper()
	var r Request
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return r
}

// The hand-written request decodes, on the host, to exactly what
// encoding/json's would: every string, hostile bytes included (quotes,
// backslashes, control characters, invalid UTF-8, a would-be field).
func FuzzRequestJSON(f *testing.F) {
	f.Add("fs.read", "small.txt", "PATH=/usr/bin", "/workspace", "", false)
	f.Add("t", `"},"tool":"agent.update`, "A=\x00\x1f\x7f\\\"\n\r\t", "/w\xff\xfe", "s3cret", true)
	f.Add("\u2028", "\xe2\x80", "<&>", "", "", false)
	f.Fuzz(func(t *testing.T, tool, arg, env, cwd, secret string, terminal bool) {
		for _, r := range []Request{
			{Tool: tool, Args: []string{arg, ""}, Env: []string{env, arg}, Cwd: cwd, Secret: secret},
			{Tool: tool, Decide: &Decide{Terminal: terminal}},
		} {
			ours, ok := r.appendJSON(nil)
			if !ok {
				t.Fatal("a request without a host operation or join is written by hand")
			}
			theirs, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := decodeRequest(t, ours), decodeRequest(t, theirs); !reflect.DeepEqual(got, want) {
				t.Fatalf("ours %q decodes to %+v, encoding/json's %q to %+v", ours, got, theirs, want)
			}
		}
	})
}

// A request with a host operation or a join is left to encoding/json,
// and still goes through Send's encoding whole.
func TestRequestJSONLeavesTheRest(t *testing.T) {
	r := Request{Tool: "agent.update", HostOp: &HostOp{Op: "prompt", Input: json.RawMessage(`{"a":1}`)}}
	if _, ok := r.appendJSON(nil); ok {
		t.Fatal("a host operation was written by hand")
	}
	b, _, err := encode(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeRequest(t, b); got.HostOp == nil || string(got.HostOp.Input) != `{"a":1}` {
		t.Fatalf("%q decodes to %+v", b, got)
	}
}
