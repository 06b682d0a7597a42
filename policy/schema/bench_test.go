package schema

import (
	"encoding/json"
	"testing"
	"time"
)

const benchSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
"properties":{"path":{"type":"string","minLength":1},"head":{"type":"integer","minimum":1},
"mode":{"enum":["text","bytes"]},"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true}},
"required":["path"],"additionalProperties":false}`

const benchInput = `{"path":"/workspace/README.md","head":20,"mode":"text","tags":["a","b","c"]}`

// baseline times n decodes of doc with encoding/json, the cost every caller
// pays anyway before validating.
func baseline(b *testing.B, doc string) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		var x any
		_ = json.Unmarshal([]byte(doc), &x)
	}
	return time.Since(start)
}

// BenchmarkValidate measures validating a typical tool input and reports it
// relative to decoding the same input with encoding/json in the same run
// ("x-decode" = validate time / decode time).
func BenchmarkValidate(b *testing.B) {
	s, err := Compile([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	var v any
	if err := json.Unmarshal([]byte(benchInput), &v); err != nil {
		b.Fatal(err)
	}
	base := baseline(b, benchInput)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := s.Validate(v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start))/float64(base), "x-decode")
}

// BenchmarkCompile measures compiling a tool schema (once per tool call)
// relative to decoding the schema document itself.
func BenchmarkCompile(b *testing.B) {
	base := baseline(b, benchSchema)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := Compile([]byte(benchSchema)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start))/float64(base), "x-decode")
}
