package fsops

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// longDir is a directory whose sockets' paths pass sun_path's 107 bytes.
func longDir(t *testing.T, base string) string {
	t.Helper()
	dir := filepath.Join(base, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A stream socket past sun_path is bound and dialled (ptyterm's terminal,
// an MCP keeper), and its errors name the path, with their errno.
func TestUnixSocketPastSunPath(t *testing.T) {
	path := filepath.Join(longDir(t, t.TempDir()), "main.sock")
	if len(path) <= MaxSocketPath {
		t.Fatalf("path of %d bytes is not long enough for the test", len(path))
	}
	if _, err := DialUnix(path, time.Second); !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), path) {
		t.Fatalf("dial of nothing: %v, want ENOENT naming the path", err)
	}
	l, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no socket at the long path: %v", err)
	}
	c, err := DialUnix(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("x"))
	buf := make([]byte, 1)
	if n, err := s.Read(buf); n != 1 || err != nil {
		t.Fatalf("read %d %v", n, err)
	}
	c.Close()
	s.Close()
	l.Close()
	// Closing leaves the file (its name while bound was a descriptor's).
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the socket file went with the listener: %v", err)
	}
	if _, err := DialUnix(path, time.Second); !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("dial of a dead socket: %v, want ECONNREFUSED", err)
	}
}

// A hostile local user who can rename a directory on a long socket
// path's way and put a symlink there (to a directory of theirs, with a
// listener of theirs) gets neither the dial nor the bind: the directory
// is opened without following any symlink. Afterwards their listener
// has had no connection and their directory holds no socket of ours.
func TestUnixSocketLongPathRefusesSymlinkSwap(t *testing.T) {
	base := t.TempDir()
	theirs := longDir(t, filepath.Join(base, "theirs"))
	bait := filepath.Join(theirs, "main.sock")
	trap, err := ListenUnix(bait)
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	// Ours was base/ours/...; the attacker swapped ours for a symlink.
	if err := os.Symlink(filepath.Join(base, "theirs"), filepath.Join(base, "ours")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(base, "ours", strings.TrimPrefix(theirs, filepath.Join(base, "theirs")+"/"), "main.sock")
	if len(path) <= MaxSocketPath {
		t.Fatalf("path of %d bytes is not long enough for the test", len(path))
	}
	if c, err := DialUnix(path, time.Second); err == nil || !errors.Is(err, unix.ELOOP) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial through a symlink: %v, want ELOOP", err)
	}
	trap.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if c, err := trap.Accept(); err == nil {
		c.Close()
		t.Fatal("the attacker's listener got a connection")
	}
	l, err := ListenUnix(filepath.Join(filepath.Dir(path), "ours.sock"))
	closeIf(l)
	if !errors.Is(err, unix.ELOOP) {
		t.Fatalf("bind through a symlink: %v, want ELOOP", err)
	}
	if _, err := os.Lstat(filepath.Join(theirs, "ours.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a socket was bound in the attacker's directory: %v", err)
	}
}

func closeIf(l interface{ Close() error }) {
	if l != nil {
		l.Close()
	}
}
