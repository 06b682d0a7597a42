package fsops

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestQuarantineFollowsNoSymlink: the agent leaves symlinks in its
// workspace where the end of the run will move a protected path aside
// or put an original back (a directory on the way replaced by a link to
// a host directory, a link in the final place). Neither step follows
// one: the host directory's files are untouched and nothing is created
// there; the same steps on plain directories work.
func TestQuarantineFollowsNoSymlink(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	outside, _ := filepath.EvalSymlinks(t.TempDir())
	os.WriteFile(filepath.Join(outside, ".envrc"), []byte("host\n"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "evil"))
	os.MkdirAll(filepath.Join(ws, "a"), 0o755)
	os.Symlink(filepath.Join(outside, "planted"), filepath.Join(ws, "a/.envrc"))

	// attack: move aside through the symlinked directory
	if to, err := QuarantineAside(ws, "evil/.envrc", ".q"); err == nil {
		t.Errorf("moved through a symlink to %s", to)
	}
	// attack: put an original back through it, or onto a symlink
	orig := Original{Mode: unix.S_IFREG | 0o644, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Data: []byte("original\n")}
	if err := RestoreOriginal(ws, "evil/.envrc", orig); err == nil {
		t.Error("restored through a symlinked directory")
	}
	if err := RestoreOriginal(ws, "evil/sub/.envrc", orig); err == nil {
		t.Error("restored below a symlinked directory")
	}
	if err := RestoreOriginal(ws, "a/.envrc", orig); !errors.Is(err, unix.EEXIST) {
		t.Errorf("restore onto a symlink: %v, want EEXIST", err)
	}
	// check: the host directory is as it was
	if b, _ := os.ReadFile(filepath.Join(outside, ".envrc")); string(b) != "host\n" {
		t.Errorf("outside .envrc: %q", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("outside holds %d entries", len(ents))
	}

	// the symlink itself is moved aside, and the original goes back
	if to, err := QuarantineAside(ws, "a/.envrc", ".q"); err != nil || to != "a/.envrc.q" {
		t.Fatalf("aside: %q %v", to, err)
	}
	if err := RestoreOriginal(ws, "a/.envrc", orig); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a/.envrc")); string(b) != "original\n" {
		t.Errorf("restored %q", b)
	}
	// a taken quarantine name is never replaced
	os.WriteFile(filepath.Join(ws, "a/.envrc"), []byte("second\n"), 0o644)
	if to, err := QuarantineAside(ws, "a/.envrc", ".q"); err != nil || to != "a/.envrc.q.1" {
		t.Errorf("second aside: %q %v", to, err)
	}
	if l, _ := os.Readlink(filepath.Join(ws, "a/.envrc.q")); l != filepath.Join(outside, "planted") {
		t.Errorf("first quarantined link now %q", l)
	}
	// missing directories are made again; a symlink original comes back
	// as a symlink
	link := Original{Mode: unix.S_IFLNK | 0o777, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Link: "../x"}
	if err := RestoreOriginal(ws, "gone/deeper/.vscode", link); err != nil {
		t.Fatal(err)
	}
	if l, _ := os.Readlink(filepath.Join(ws, "gone/deeper/.vscode")); l != "../x" {
		t.Errorf("restored link %q", l)
	}
}
