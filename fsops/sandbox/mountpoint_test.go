package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A bind's mount point is made or found through its checked parent, never
// through a symlink, and nothing but an empty directory or regular file of
// the right kind is taken as one. Each refusal leaves what was there as it
// was, and nothing is made beside it.
func TestMountPoint(t *testing.T) {
	base := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(base, "home/agent"), 0o755))
	must(os.Symlink(outside, filepath.Join(base, "home/link")))
	must(os.WriteFile(filepath.Join(base, "home/file"), []byte("keep"), 0o644))
	must(os.Symlink(filepath.Join(outside, "target"), filepath.Join(base, "home/agent/dangling")))
	must(syscall.Mkfifo(filepath.Join(base, "home/fifo"), 0o644))

	// Made: a directory and a file, parents included.
	for _, tc := range []struct {
		rel string
		dir bool
	}{{"/ctx/tool/fs.read.d", true}, {"/ctx/tool/fs.read", false}, {"/home/agent", true}} {
		pfd, name, err := MountPoint(base, tc.rel, tc.dir)
		if err != nil {
			t.Fatalf("%s: %v", tc.rel, err)
		}
		unix.Close(pfd)
		if name != filepath.Base(tc.rel) {
			t.Fatalf("%s: name %q", tc.rel, name)
		}
		st, err := os.Lstat(filepath.Join(base, tc.rel))
		if err != nil || st.IsDir() != tc.dir || (!tc.dir && !st.Mode().IsRegular()) {
			t.Fatalf("%s: made %v %v", tc.rel, st.Mode(), err)
		}
	}
	// Refused.
	for _, tc := range []struct {
		rel  string
		dir  bool
		want string
	}{
		{"/home/link/x", true, "symlink on the way"},
		{"/home/link/x", false, "symlink on the way"},
		{"/home/link", true, "exists and is not a directory"},
		{"/home/agent/dangling", false, "exists and is not a regular file"},
		{"/home/file", true, "exists and is not a directory"},
		{"/home/fifo", false, "exists and is not a regular file"},
		{"/home/file/x", false, "not a directory"},
	} {
		pfd, _, err := MountPoint(base, tc.rel, tc.dir)
		if err == nil {
			unix.Close(pfd)
			t.Errorf("%s (dir=%v): made", tc.rel, tc.dir)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s (dir=%v): %v, want %q", tc.rel, tc.dir, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("made through a symlink: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "home/file")); string(b) != "keep" {
		t.Fatalf("a refused point was changed: %q", b)
	}
}
