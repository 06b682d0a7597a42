package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"ctx/policy/sandboxplan"
)

// fillTmpfs works on any directory; the sandbox gives it a fresh tmpfs.
func TestFillTmpfs(t *testing.T) {
	old := syscall.Umask(0o077) // a strict umask must not close it to the agent
	defer syscall.Umask(old)
	dir := t.TempDir()
	err := fillTmpfs(dir, []sandboxplan.FillEntry{
		{Path: "tools", Kind: sandboxplan.FillDir},
		{Path: "tools/fs.read", Kind: sandboxplan.FillLink, Link: "/ctx/bin/ctx"},
		{Path: "tools/fs.read.toolspec.json", Kind: sandboxplan.FillFile, Data: []byte(`{"name":"fs.read"}`)},
		{Path: "passwd", Kind: sandboxplan.FillFile, Data: []byte("root:x:0:0::/:/bin/sh\n"), Mode: 0o644},
		{Path: "SOP", Kind: sandboxplan.FillFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{"tools": os.ModeDir | 0o755, "tools/fs.read.toolspec.json": 0o444, "passwd": 0o644, "SOP": 0o444} {
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
}

// Entries that would leave the directory, go through a link, replace an
// entry or land in a directory the fill did not make are refused, naming
// the entry, and nothing is written outside the directory.
func TestFillTmpfsRefusals(t *testing.T) {
	for _, bad := range [][]sandboxplan.FillEntry{
		{{Path: "../escape", Kind: sandboxplan.FillFile}},
		{{Path: "/abs", Kind: sandboxplan.FillFile}},
		{{Path: "a//b", Kind: sandboxplan.FillFile}},
		{{Path: "tools/x", Kind: sandboxplan.FillFile}},
		{{Path: "l", Kind: sandboxplan.FillLink, Link: ".."}, {Path: "l/escape", Kind: sandboxplan.FillFile}},
		{{Path: "f", Kind: sandboxplan.FillFile}, {Path: "f", Kind: sandboxplan.FillFile}},
		{{Path: "x", Kind: "fifo"}},
	} {
		base := t.TempDir()
		dir := filepath.Join(base, "fill")
		os.Mkdir(dir, 0o755)
		err := fillTmpfs(dir, bad)
		if err == nil || !strings.Contains(err.Error(), bad[len(bad)-1].Path) {
			t.Errorf("%+v: %v", bad, err)
		}
		entries, _ := os.ReadDir(base)
		if len(entries) != 1 || entries[0].Name() != "fill" {
			t.Errorf("%+v: %v written beside the directory", bad, entries)
		}
	}
}
