package mcpstdio

import (
	"encoding/json"
	"math"
	"testing"
)

// FuzzProgressFrame: a progress frame a served tool writes becomes a
// notification serve can always encode.
func FuzzProgressFrame(f *testing.F) {
	f.Add([]byte(`{"type":"progress","run":"r","progress":1,"total":3,"message":"step 1"}`))
	f.Add([]byte(`{"type":"progress","progress":-1e308}`))
	f.Add([]byte(`{"type":"message","progress":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		p, ok := parseProgressFrame(line)
		if !ok {
			return
		}
		if math.IsNaN(p.Progress) || math.IsInf(p.Progress, 0) {
			t.Fatalf("%s: progress %v", line, p.Progress)
		}
		if _, err := json.Marshal(map[string]any{"progressToken": 1, "progress": p.Progress, "total": p.Total, "message": p.Message}); err != nil {
			t.Fatalf("%s: unencodable: %v", line, err)
		}
	})
}
