package fsops

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenNoSymlinks: a symlink anywhere on the way, the last component
// included, is ELOOP, through openat2 and through the per-component walk
// that older kernels get; real paths open as what they are.
func TestOpenNoSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.MkdirAll(filepath.Join(real, "sub"), 0o755)
	os.WriteFile(filepath.Join(real, "sub", "f"), []byte("x"), 0o644)
	os.Symlink(real, filepath.Join(dir, "link"))
	os.Symlink(filepath.Join(real, "sub", "f"), filepath.Join(real, "flink"))

	for name, open := range map[string]func(string) (int, error){
		"openat2": OpenNoSymlinks, "per-component": openNoSymlinksByComponent,
	} {
		for _, p := range []string{filepath.Join(real, "sub"), filepath.Join(real, "sub", "f")} {
			fd, err := open(p)
			if err != nil {
				t.Errorf("%s %s: %v", name, p, err)
				continue
			}
			unix.Close(fd)
		}
		for _, p := range []string{filepath.Join(dir, "link"), filepath.Join(dir, "link", "sub"), filepath.Join(real, "flink")} {
			fd, err := open(p)
			if err == nil {
				unix.Close(fd)
				t.Errorf("%s %s: opened through a symlink", name, p)
			} else if !errors.Is(err, unix.ELOOP) {
				t.Errorf("%s %s: %v, want ELOOP", name, p, err)
			}
		}
		if _, err := open(filepath.Join(real, "missing")); !errors.Is(err, unix.ENOENT) {
			t.Errorf("%s missing: %v, want ENOENT", name, err)
		}
	}
}

// TestCloseInheritedOnExec: a descriptor opened without O_CLOEXEC (as a
// caller's shell leaves one) is close-on-exec afterwards; 0-2 are not.
func TestCloseInheritedOnExec(t *testing.T) {
	fd, err := unix.Open(t.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	CloseInheritedOnExec()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("fd %d flags %#x, %v: want FD_CLOEXEC", fd, flags, err)
	}
	if flags, _ := unix.FcntlInt(2, unix.F_GETFD, 0); flags&unix.FD_CLOEXEC != 0 {
		t.Error("stderr became close-on-exec")
	}
}

// A relative path is resolved from the current directory, with the same
// refusal of a symlink on the way, and ".." is refused outright (the
// sandbox init opens its targets relative to the new root it entered).
func TestOpenNoSymlinksRelative(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	fd, err := OpenNoSymlinks("a/b")
	if err != nil {
		t.Fatalf("a/b: %v", err)
	}
	unix.Close(fd)
	for _, bad := range []string{"link/b", "link", "../x", "a/../a", "./a"} {
		if fd, err := OpenNoSymlinks(bad); err == nil {
			unix.Close(fd)
			t.Errorf("%s opened", bad)
		}
	}
}
