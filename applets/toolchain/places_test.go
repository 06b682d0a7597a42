package toolchain

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"ctx/fsops"
	"ctx/policy"
)

// Every agent's writable mount and every recorded session workspace,
// private or shared, is a place others write; a read-only mount is not.
// (Agents that run as the person's own uid leave links the ownership
// check cannot tell from the person's.)
func TestOthersWrite(t *testing.T) {
	dir := t.TempDir()
	root := fsops.Root{Dir: dir}
	for _, d := range []string{"agent/a.d", "agent/b.d", "agent/not-an-agent",
		"home/1000/agent/a/session/s1", "shared/team/agent/b/session/s2", "home/1000/agent/a/session/s3"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "home/1000/agent/a/session/s1/workspace"), []byte("/work/a\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "shared/team/agent/b/session/s2/workspace"), []byte("/work/b\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "home/1000/agent/a/session/s3/workspace"), []byte("relative\n"), 0o644)
	mounts := map[string][]policy.Mount{
		"a": {{Source: "/data/rw", Target: "/rw"}, {Source: "/data/ro", Target: "/ro", ReadOnly: true}},
		"b": {{Source: "/srv/drop", Target: "/drop"}},
	}
	got := OthersWrite(root, func(name string) []policy.Mount { return mounts[name] })
	slices.Sort(got)
	want := []string{"/data/rw", "/srv/drop", "/work/a", "/work/b"}
	if !slices.Equal(got, want) {
		t.Fatalf("places %v, want %v", got, want)
	}
	if !policy.WithinAny("/work/b/tools/tool", got) || policy.WithinAny("/data/ro/tool", got) {
		t.Fatal("WithinAny")
	}
}
