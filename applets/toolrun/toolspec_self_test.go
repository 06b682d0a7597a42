package toolrun

import (
	"strings"
	"testing"
)

func TestParseSelfSpec(t *testing.T) {
	for _, c := range []struct{ in, input, output, err string }{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, "", ""},
		{`{"name":"x","inputSchema":{"type":"object"},"outputSchema":{"type":"string"}}`, `{"type":"object"}`, `{"type":"string"}`, ""},
		{`{"input":{"type":"object"},"output":{"type":"array"}}`, `{"type":"object"}`, `{"type":"array"}`, ""},
		{`{"type":5}`, "", "", "input schema"},
		{`{"inputSchema":[1]}`, "", "", "not a JSON object"},
		{`{"inputSchema":{},"outputSchema":"x"}`, "", "", "output schema is not a JSON object"},
		{`[]`, "", "", "not one JSON object"},
		{`{} {}`, "", "", "not one JSON object"},
	} {
		s, err := parseSelfSpec([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(s.Input) != c.input || string(s.Output) != c.output {
			t.Errorf("%s: %s %s %v", c.in, s.Input, s.Output, err)
		}
	}
}

// FuzzParseSelfSpec: what a tool says of itself is parsed or refused,
// never a panic, and what is accepted is JSON objects.
func FuzzParseSelfSpec(f *testing.F) {
	f.Add([]byte(`{"inputSchema":{"type":"object"},"outputSchema":{"type":"string"}}`))
	f.Add([]byte(`{"input":{"$ref":"#/x"},"output":{}}`))
	f.Add([]byte(`{"type":"object","properties":{"a":{"enum":[1,"x"]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSelfSpec(b)
		if err != nil {
			return
		}
		if jsonObject(s.Input) == nil || (s.Output != nil && jsonObject(s.Output) == nil) {
			t.Fatalf("accepted %q: %s %s", b, s.Input, s.Output)
		}
	})
}
