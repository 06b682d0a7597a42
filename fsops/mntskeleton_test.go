package fsops

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"ctx/policy"
)

func TestWriteMntSkeleton(t *testing.T) {
	old := syscall.Umask(0o077) // a strict umask must not close it to the agent
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "run.mnt")
	err := WriteMntSkeleton(dir, []policy.MntEntry{
		{Path: "tools", Kind: policy.MntDir},
		{Path: "tools/fs.read", Kind: policy.MntLink, Link: "/ctx/bin/ctx"},
		{Path: "tools/fs.read.toolspec.json", Kind: policy.MntFile, Data: []byte(`{"name":"fs.read"}`)},
		{Path: "SOP", Kind: policy.MntFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{"": os.ModeDir | 0o755, "tools": os.ModeDir | 0o755, "tools/fs.read.toolspec.json": 0o444, "SOP": 0o444} {
		st, err := os.Lstat(filepath.Join(dir, p))
		if err != nil || st.Mode() != mode {
			t.Errorf("%s: %v %v, want %v", p, st.Mode(), err, mode)
		}
	}
	if l, _ := os.Readlink(filepath.Join(dir, "tools/fs.read")); l != "/ctx/bin/ctx" {
		t.Errorf("link %q", l)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "tools/fs.read.toolspec.json")); string(b) != `{"name":"fs.read"}` {
		t.Errorf("toolspec %q", b)
	}
	// An existing directory is not reused.
	if err := WriteMntSkeleton(dir, nil); err == nil {
		t.Error("an existing directory was taken")
	}
}

// Entries that would leave the skeleton, go through a link, replace an
// entry or land in a directory the skeleton did not make are refused, and
// nothing is written outside it.
func TestWriteMntSkeletonRefusals(t *testing.T) {
	for _, bad := range [][]policy.MntEntry{
		{{Path: "../escape", Kind: policy.MntFile}},
		{{Path: "/abs", Kind: policy.MntFile}},
		{{Path: "a//b", Kind: policy.MntFile}},
		{{Path: "tools/x", Kind: policy.MntFile}},
		{{Path: "l", Kind: policy.MntLink, Link: ".."}, {Path: "l/escape", Kind: policy.MntFile}},
		{{Path: "f", Kind: policy.MntFile}, {Path: "f", Kind: policy.MntFile}},
		{{Path: "x", Kind: "fifo"}},
	} {
		base := t.TempDir()
		dir := filepath.Join(base, "run.mnt")
		err := WriteMntSkeleton(dir, bad)
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("%+v: %v", bad, err)
		}
		entries, _ := os.ReadDir(base)
		if len(entries) != 1 || entries[0].Name() != "run.mnt" {
			t.Errorf("%+v: %v written beside the skeleton", bad, entries)
		}
	}
}
