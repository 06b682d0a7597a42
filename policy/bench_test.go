package policy

import (
	"bytes"
	"fmt"
	"testing"
)

// Benchmarks compare each measurement with a baseline in the same run:
//
//	go test ./policy -run '^$' -bench . -benchmem
//
// BenchmarkPolicyParse: ParsePolicy of a 100,000-rule file against
// bytes.Fields over every line of the same file (the least any parser
// must do). BenchmarkPolicyDecision: one Allows against a plain map lookup
// of a pre-built string key in a map of the same size.

const benchRules = 100_000

// benchPolicyFile renders n rules over 16 subjects and every class.
func benchPolicyFile(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		subject := fmt.Sprintf("agent%02d_t", i%16)
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "allow %s tool:tool-%d execute\n", subject, i)
		case 1:
			fmt.Fprintf(&b, "allow %s shared:space-%d write\n", subject, i)
		case 2:
			fmt.Fprintf(&b, "allow %s model:provider-%d/model-%d use\n", subject, i%97, i)
		case 3:
			fmt.Fprintf(&b, "allow %s agent:child-%d start\n", subject, i)
		default:
			fmt.Fprintf(&b, "allow %s session:s-%d resume\n", subject, i)
		}
	}
	return b.Bytes()
}

func BenchmarkPolicyParse(b *testing.B) {
	data := benchPolicyFile(benchRules)
	b.Run("ParsePolicy", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			p, err := ParsePolicy(data)
			if err != nil || p.Len() != benchRules {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-bytes.Fields", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			rest := data
			for len(rest) > 0 {
				line, after, _ := bytes.Cut(rest, []byte{'\n'})
				rest = after
				if len(bytes.Fields(line)) == 4 {
					n++
				}
			}
			if n != benchRules {
				b.Fatal(n)
			}
		}
	})
}

func BenchmarkPolicyDecision(b *testing.B) {
	data := benchPolicyFile(benchRules)
	p, err := ParsePolicy(data)
	if err != nil {
		b.Fatal(err)
	}
	// The rule on line 50,000 (a tool rule), asked about as a request would.
	subject, obj := "agent00_t", Object{ClassTool, "tool-50000"}
	if !p.Allows(subject, obj, PermExecute) {
		b.Fatal("rule missing")
	}
	b.Run("Allows", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !p.Allows(subject, obj, PermExecute) {
				b.Fatal("denied")
			}
		}
	})
	b.Run("baseline-map-lookup", func(b *testing.B) {
		m := make(map[string]struct{}, benchRules)
		for _, r := range p.Rules() {
			m[r.String()] = struct{}{}
		}
		key := "allow agent00_t tool:tool-50000 execute"
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := m[key]; !ok {
				b.Fatal("missing")
			}
		}
	})
	b.Run("Check-tool-all-layers", func(b *testing.B) {
		a := &Agent{Name: "a", Subject: subject, UID: 1000, GID: 1000, Ceiling: CeilingAll, Policy: p}
		v := View{Mounts: []Mount{{Source: "/srv/ctx", Target: "/ctx", ReadOnly: true}}}
		f := Facts{File: &FileFacts{Path: "/srv/ctx/tool/tool-50000", Mode: 0o755}, ToolPolicy: p}
		b.ReportAllocs()
		for b.Loop() {
			if d := Check(a, v, obj, PermExecute, f); !d.Allowed {
				b.Fatal(d.Reason)
			}
		}
	})
}
