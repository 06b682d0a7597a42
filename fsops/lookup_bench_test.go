package fsops

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkControlTreeFacts walks a control directory shaped as
// bootstrap writes a builtin tool's: eight controls and empty pre and post
// hook directories. A start walks one for each tool of its tiers.
func BenchmarkControlTreeFacts(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "fs.read.d")
	for _, d := range []string{"hooks/pre.d", "hooks/post.d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []string{"annotations", "cap", "description", "log", "name", "policy", "schema", "status"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if facts, _, err := ControlTreeFacts(dir); err != nil || len(facts) != 12 {
			b.Fatalf("%d facts, %v", len(facts), err)
		}
	}
}
