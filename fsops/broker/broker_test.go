package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// TestBrokerLongSocketPath: a run directory deeper than sun_path holds (a
// deep root's landlock run) still gets its broker, bound and dialed through
// a descriptor of the directory.
func TestBrokerLongSocketPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SocketName)
	if len(path) <= fsops.MaxSocketPath {
		t.Fatalf("path of %d bytes is not long enough for the test", len(path))
	}
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no socket at the long path: %v", err)
	}
	c, err := Dial(path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer unix.Close(c)
	if err := Send(c, Reply{Exit: 7}, nil); err != nil {
		t.Fatal(err)
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(a)
	var got Reply
	if _, err := Recv(a, &got, 0); err != nil || got.Exit != 7 {
		t.Fatalf("received %+v, %v", got, err)
	}
}

// A hostile local user who swaps a directory on a long broker socket
// path's way for a symlink (to a directory of theirs, with a listener of
// theirs) gets neither the dial nor the bind: the directory is opened
// without following any symlink. Afterwards their listener has had no
// connection and their directory holds no socket of ours.
func TestBrokerLongPathRefusesSymlinkSwap(t *testing.T) {
	base := t.TempDir()
	long := filepath.Join(strings.Repeat("d", 60), strings.Repeat("e", 60))
	theirs := filepath.Join(base, "theirs", long)
	if err := os.MkdirAll(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	trap, err := Listen(filepath.Join(theirs, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	if err := os.Symlink(filepath.Join(base, "theirs"), filepath.Join(base, "ours")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(base, "ours", long, SocketName)
	if len(path) <= fsops.MaxSocketPath {
		t.Fatalf("path of %d bytes is not long enough for the test", len(path))
	}
	if c, err := Dial(path); !errors.Is(err, unix.ELOOP) {
		fsops.CloseFD(c)
		t.Fatalf("broker dial through a symlink: %v, want ELOOP", err)
	}
	rc, err := trap.f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { // non-blocking: a connection is there or not
		if c, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC); err == nil {
			unix.Close(c)
			t.Error("the attacker's listener got a connection")
		}
	})
	l, err := Listen(filepath.Join(filepath.Dir(path), "ours.sock"))
	if err == nil {
		l.Close()
	}
	if !errors.Is(err, unix.ELOOP) {
		t.Fatalf("bind through a symlink: %v, want ELOOP", err)
	}
	if _, err := os.Lstat(filepath.Join(theirs, "ours.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a socket was bound in the attacker's directory: %v", err)
	}
}
