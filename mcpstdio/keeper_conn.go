package mcpstdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// The keeper's client side and its sockets: dial, call, peer
// credentials.

// KeeperConn is a caller's connection to a keeper, for one call.
type KeeperConn struct {
	conn *net.UnixConn
	r    *bufio.Reader
	name string
}

// KeeperError is a call's failure as the keeper reported it; its text is
// the keeper's own (the server's error as a cold call would have it).
type KeeperError struct {
	Msg       string
	Cancelled bool
}

func (e *KeeperError) Error() string { return e.Msg }

// Is makes a cancelled call's error match ErrCancelled.
func (e *KeeperError) Is(target error) bool { return e.Cancelled && target == ErrCancelled }

// DialKeeper connects to the keeper at path and checks that it may be
// used: the peer runs as our uid (SO_PEERCRED), speaks KeeperProtocol and
// keeps exactly spec: the same server name, the same entry digest
// (EntryDigest) and the same directory. Anything else is an error: a stale
// socket, another user's, or a keeper of another entry is never used.
func DialKeeper(path string, spec KeeperSpec) (*KeeperConn, error) {
	conn, err := dialUnix(path)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) (*KeeperConn, error) {
		conn.Close()
		return nil, fmt.Errorf("keeper %s: "+format, append([]any{path}, args...)...)
	}
	_, uid, err := PeerCred(conn)
	if err != nil {
		return fail("%v", err)
	}
	if uid != os.Geteuid() {
		return fail("runs as uid %d, not ours", uid)
	}
	_ = conn.SetReadDeadline(time.Now().Add(keeperHelloWait))
	r := bufio.NewReaderSize(conn, 64<<10)
	line, err := readLine(r, 4096)
	if err != nil {
		return fail("no hello: %v", err)
	}
	var h keeperHello
	if err := json.Unmarshal(line, &h); err != nil {
		return fail("malformed hello: %v", err)
	}
	if h.Keeper != KeeperProtocol || h.Server != spec.Name || h.Entry != EntryDigest(spec.Server) || h.Cwd != spec.Cwd {
		return fail("keeps another server (protocol %d, server %q, entry %s, directory %q)", h.Keeper, h.Server, h.Entry, h.Cwd)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return &KeeperConn{conn: conn, r: r, name: spec.Name}, nil
}

// Close closes the connection (cancelling a call still under way).
func (k *KeeperConn) Close() error { return k.conn.Close() }

// Call is CallToolContext through the keeper: when ctx ends first the
// keeper is asked to cancel the call (it sends the server
// notifications/cancelled for it) and the error wraps ErrCancelled.
func (k *KeeperConn) Call(ctx context.Context, tool string, arguments json.RawMessage, onProgress func(Progress)) (*CallResult, error) {
	if len(arguments) == 0 {
		arguments = json.RawMessage("{}")
	}
	gone := func(err error) (*CallResult, error) {
		return nil, &Error{Server: k.name, Op: "tools/call", Err: fmt.Errorf("the server's keeper went away: %v", err)}
	}
	_ = k.conn.SetWriteDeadline(time.Now().Add(keeperWriteWait))
	if _, err := k.conn.Write(encodeFrame(keeperCall{Tool: tool, Arguments: arguments, Progress: onProgress != nil})); err != nil {
		return gone(err)
	}
	// The answer is read here; a watcher turns ctx's end into a cancel
	// line and a deadline for the keeper's answer.
	finished := make(chan struct{})
	defer close(finished)
	var cancelled atomic.Bool
	go func() {
		select {
		case <-ctx.Done():
			cancelled.Store(true)
			_ = k.conn.SetWriteDeadline(time.Now().Add(keeperCancelWait))
			_, _ = k.conn.Write(encodeFrame(keeperCall{Cancel: true}))
			_ = k.conn.SetReadDeadline(time.Now().Add(keeperCancelWait))
		case <-finished:
		}
	}()
	for {
		line, err := readLine(k.r, maxKeeperLine)
		var rep keeperReply
		if err == nil {
			if jerr := json.Unmarshal(line, &rep); jerr != nil {
				err = fmt.Errorf("malformed answer: %v", jerr)
			}
		}
		switch {
		case cancelled.Load() && (err != nil || rep.Progress == nil):
			// Asked to stop: the keeper's answer (it told the server),
			// or none in time; whatever came, the call was cancelled.
			return nil, &Error{Server: k.name, Op: "tools/call", Err: ErrCancelled}
		case err != nil:
			return gone(err)
		case rep.Progress != nil:
			if onProgress != nil {
				onProgress(*rep.Progress)
			}
			continue
		case rep.Error != "":
			return nil, &KeeperError{Msg: rep.Error, Cancelled: rep.Cancelled}
		case rep.Result == nil:
			return gone(errors.New("an answer without a result"))
		}
		return &CallResult{Content: rep.Result.Content, Structured: rep.Result.Structured, IsError: rep.Result.IsError}, nil
	}
}

// PeerCred is the pid (in our pid namespace; 0 outside it) and uid of
// the process at the other end of conn, as the kernel recorded them when
// the connection was made.
func PeerCred(conn *net.UnixConn) (pid, uid int, err error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, -1, err
	}
	if cerr != nil {
		return 0, -1, fmt.Errorf("SO_PEERCRED: %v", cerr)
	}
	return int(cred.Pid), int(cred.Uid), nil
}

// descendsFrom reports whether pid is ancestor or lies below it, walking
// the parent chain in /proc (at most 256 steps).
func descendsFrom(pid, ancestor int) bool {
	for i := 0; i < 256 && pid > 0; i++ {
		if pid == ancestor {
			return true
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 {
			return false
		}
		if pid, err = strconv.Atoi(f[1]); err != nil {
			return false
		}
	}
	return false
}

// ListenKeeper binds and listens on a unix stream socket at path, which
// must not exist, at any length (fsops.ListenUnix). The socket is not
// removed when the listener closes.
func ListenKeeper(path string) (*net.UnixListener, error) { return fsops.ListenUnix(path) }

func dialUnix(path string) (*net.UnixConn, error) { return fsops.DialUnix(path, 0) }

// readLine reads one newline-terminated line of at most max bytes (the
// newline excluded).
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			return nil, fmt.Errorf("line exceeds %d bytes", max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
