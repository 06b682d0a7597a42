package fsops

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Every socket ctx binds or dials by path (the terminal's, the broker's,
// an MCP keeper's) goes through SocketAddress, so that it works at any
// length: a socket address holds 107 bytes of path (sun_path, 108 with
// its NUL), and a runtime directory under a deep TMPDIR, or a tree deep
// enough for an iso landlock run directory, passes that. A longer path is
// reached through a descriptor of its directory, /proc/self/fd/N/NAME:
// the directory is opened without following any symlink on the way
// (OpenNoSymlinks), so a component swapped for a symlink between the
// check and the bind or dial is refused, never followed. A path that
// fits is used as it is: one system call fewer on the dial of every tool
// call, and the same resolution as the kernel's own.

// MaxSocketPath keeps a socket path within sun_path (108 bytes, NUL included).
const MaxSocketPath = 107

// SocketAddress is the address that reaches the socket at path: path
// itself when it fits a socket address, else /proc/self/fd/N/NAME through
// a descriptor of its directory, valid until done is called.
func SocketAddress(path string) (addr string, done func(), err error) {
	if len(path) <= MaxSocketPath {
		return path, func() {}, nil
	}
	dir, err := OpenNoSymlinks(filepath.Dir(path))
	if err != nil {
		return "", nil, &os.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	addr = FDPath(dir) + "/" + filepath.Base(path)
	if len(addr) > MaxSocketPath {
		unix.Close(dir)
		return "", nil, fmt.Errorf("%s: the socket name is too long", path)
	}
	return addr, func() { unix.Close(dir) }, nil
}

// ListenUnix binds and listens on a stream socket at path (SocketAddress),
// which must not exist. The socket file is not removed when the listener
// closes: its name while bound may be a descriptor's, and the caller
// knows which file is its own.
func ListenUnix(path string) (*net.UnixListener, error) {
	addr, done, err := SocketAddress(path)
	if err != nil {
		return nil, err
	}
	defer done()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, namedSocketError(err, "listen", path)
	}
	l.SetUnlinkOnClose(false)
	return l, nil
}

// DialUnix connects to the stream socket at path (SocketAddress), waiting
// at most timeout (none when 0).
func DialUnix(path string, timeout time.Duration) (*net.UnixConn, error) {
	addr, done, err := SocketAddress(path)
	if err != nil {
		return nil, err
	}
	defer done()
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("unix", addr)
	if err != nil {
		return nil, namedSocketError(err, "dial", path)
	}
	return c.(*net.UnixConn), nil
}

// namedSocketError names path, not the descriptor's address, in an error
// of the net package, and keeps its errno for errors.Is.
func namedSocketError(err error, op, path string) error {
	if oe, ok := err.(*net.OpError); ok {
		if se, ok := oe.Err.(*os.SyscallError); ok {
			return &os.PathError{Op: op, Path: path, Err: se.Err}
		}
		return &os.PathError{Op: op, Path: path, Err: oe.Err}
	}
	return err
}
