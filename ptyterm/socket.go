package ptyterm

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// modeLineTimeout is how long a connected client has to send its mode
// line (a variable so tests can shorten it).
var modeLineTimeout = 5 * time.Second

const (
	// maxHandshakes bounds connections that are still being checked.
	maxHandshakes = 64
	// refusalWriteTimeout bounds the write of a refusal line.
	refusalWriteTimeout = time.Second
)

// terminalSocket is the listening socket of one terminal.
type terminalSocket struct {
	path string
	l    *net.UnixListener
	ino  uint64 // identity of the socket file we bound, to remove only ours
	dev  uint64
	// secret, when set, is what a client must send first (secret.go).
	secret string
}

// listenSocket creates the Unix stream socket at path, mode 0600. Missing
// parent directories are created 0700 (owned by the caller); the directory
// that holds the socket must belong to the caller or root and must not be
// writable by others unless sticky, or another user could swap the socket.
// An existing socket file is replaced only when nothing listens on it (a
// socket left by a ctxterm that died); anything else at path is refused.
// With a secret, it is written beside the socket (SecretPath) for the
// owner's clients.
func listenSocket(path, secret string) (*terminalSocket, error) {
	if path == "" || path[len(path)-1] == '/' {
		return nil, fmt.Errorf("socket path %q: not a file path", path)
	}
	dir := filepath.Dir(path)
	if err := mkdirChain(dir); err != nil {
		return nil, err
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	// Bound through its directory's descriptor when the path is too long
	// for a socket address; we remove the file ourselves, and only if it
	// is still ours.
	l, err := fsops.ListenUnix(path)
	if err != nil {
		return nil, err
	}
	// bind(2) applies the umask; the mode we promise is 0600. Until this
	// chmod the socket's mode may be wider, which is why the directory
	// must be private or sticky, and why every peer is checked anyway.
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		os.Remove(path)
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		l.Close()
		return nil, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	s := &terminalSocket{path: path, l: l, ino: st.Ino, dev: st.Dev, secret: secret}
	if secret != "" {
		if err := fsops.WriteRunSecret(SecretPath(path), secret); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// mkdirChain creates dir and its missing parents with mode 0700.
func mkdirChain(dir string) error {
	st, err := os.Stat(dir)
	if err == nil {
		if !st.IsDir() {
			return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirChain(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Chmod(dir, 0o700) // Mkdir applies the umask
}

func checkSocketDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	euid := uint32(os.Geteuid())
	if st.Uid != euid && st.Uid != 0 {
		return fmt.Errorf("socket directory %s: owned by uid %d, not by uid %d or root", dir, st.Uid, euid)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("socket directory %s: writable by others (mode %04o) and not sticky", dir, st.Mode&0o7777)
	}
	return nil
}

// removeStaleSocket makes room at path: nothing there is fine; a socket
// nobody listens on is removed; a live socket or any other file is refused.
func removeStaleSocket(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("socket path %s: exists and is not a socket (%s)", path, describeMode(st.Mode()))
	}
	c, err := fsops.DialUnix(path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("socket path %s: in use by a running terminal", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("socket path %s: cannot tell whether it is in use: %v", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// close stops listening and removes the socket file if it is still the one
// we bound (a newer terminal may have replaced a socket it saw as stale).
func (s *terminalSocket) close() {
	_ = s.l.Close() // best effort
	var st unix.Stat_t
	if unix.Lstat(s.path, &st) == nil && st.Ino == s.ino && st.Dev == s.dev && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		_ = os.Remove(s.path) // best effort
	}
	if s.secret != "" {
		_ = os.Remove(SecretPath(s.path)) // best effort
	}
}

// serve accepts clients until the listener is closed.
func (s *terminalSocket) serve(h *hub, owner int) {
	var pending atomic.Int32
	for {
		conn, err := s.l.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: back off instead of spinning.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if pending.Add(1) > maxHandshakes {
			pending.Add(-1)
			conn.Close()
			continue
		}
		go func() {
			defer pending.Add(-1)
			handshake(conn, h, owner, s.secret)
		}()
	}
}

// handshake checks the peer and reads its mode line, then hands the client
// to the hub; every refusal is one line and a closed connection.
func handshake(conn *net.UnixConn, h *hub, owner int, secret string) {
	uid, pid, err := peerCred(conn)
	if err != nil {
		conn.Close()
		return
	}
	refuse := func(r *refusal) {
		h.rec.Event(Event{Type: EventRefused, UID: &uid, PID: pid, Reason: r.reason})
		_ = conn.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
		_, _ = conn.Write(r.line()) // best effort: the peer may be gone
		// Send EOF, then read what the peer sent: closing with unread
		// input makes the peer's read fail with ECONNRESET instead of
		// seeing the refusal and EOF.
		_ = conn.CloseWrite()
		_ = conn.SetReadDeadline(time.Now().Add(refusalWriteTimeout))
		_, _ = io.Copy(io.Discard, io.LimitReader(conn, 64<<10))
		conn.Close()
	}
	if uid != owner && uid != 0 {
		refuse(&refusal{"denied", fmt.Sprintf("uid %d may not use this terminal", uid)})
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(modeLineTimeout))
	if secret != "" {
		presented, err := readSecretLine(conn)
		if err != nil || !fsops.SecretsEqual(presented, secret) {
			refuse(&refusal{"denied", "this terminal is reached with its run's secret (ctx agent watch|attach)"})
			return
		}
	}
	mode, rest, err := readModeLine(conn)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			refuse(&refusal{"timeout", fmt.Sprintf("no mode line within %v", modeLineTimeout)})
		} else {
			refuse(&refusal{"mode", `expected "watch\n" or "attach\n"`})
		}
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	c := &client{conn: conn, mode: mode, uid: uid, pid: pid}
	if r := h.join(c, rest); r != nil {
		refuse(r)
	}
}

// peerCred returns the uid and pid of the process that connected conn, as
// the kernel recorded them at connect(2).
func peerCred(conn *net.UnixConn) (uid, pid int, err error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if credErr != nil {
		return 0, 0, credErr
	}
	return int(cred.Uid), int(cred.Pid), nil
}
