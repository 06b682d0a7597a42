package ptyterm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"golang.org/x/term"

	"ctx/fsops"
)

// DetachSequence is what a user types on an attached terminal to leave
// without affecting the agent: Enter, then "~", then "." (as in ssh). The
// "~" is recognised only at the start of the session or right after Enter
// (CR or LF); "~~" there sends one "~"; "~" followed by anything else sends
// both bytes.
const DetachSequence = "Enter ~ ."

const (
	dialTimeout = 5 * time.Second
	// refusalLinger: once the first bytes from the server form a complete
	// line that looks like a refusal, the client waits this long for the
	// connection to close (a refusal) or for more bytes (it was output).
	refusalLinger = 500 * time.Millisecond
	maxRefusal    = 256
	refusalPrefix = "ctxterm: "
)

// ClientOptions tunes Connect.
type ClientOptions struct {
	// TrustedServerUIDs, when not empty, lists the uids the terminal
	// process may run as (checked with SO_PEERCRED); any other server is
	// refused before a byte is sent.
	TrustedServerUIDs []int
	// Raw relays the terminal's output as it is. By default it passes
	// through a ControlFilter: the agent's clipboard, title and device
	// control strings never reach the client's terminal.
	Raw bool
	// Secret, when set, is sent first, as the line "secret HEX" a
	// terminal served with a secret asks for (ReadSecret finds it).
	Secret string
}

// End says how a connection ended.
type End int

const (
	// EndClosed: ctxterm closed the connection (the command exited, or
	// the client was dropped for falling behind).
	EndClosed End = iota + 1
	// EndDetached: the user typed the detach sequence.
	EndDetached
)

// RefusedError is ctxterm's refusal of a client: the reason word (denied,
// busy, limit, mode, timeout, exiting) and its text.
type RefusedError struct {
	Reason, Text string
}

func (e *RefusedError) Error() string { return "terminal refused: " + e.Reason + ": " + e.Text }

// Connect joins the terminal at socketPath in mode and copies its output to
// out (through a ControlFilter unless opts.Raw) until the terminal closes the connection or the user detaches, and
// says which (End is 0 when err is not nil). A refusal by the terminal is a
// *RefusedError.
//
// Watch never reads in. Attach copies in to the terminal; when in is a
// terminal, Connect puts it in raw mode (restored on every return path),
// sends its window size at once and after each SIGWINCH, and watches for
// the detach sequence. When in is not a terminal its bytes are sent as
// they are (no detach sequence) and its EOF ends only the input: output
// keeps flowing until the terminal closes the connection.
func Connect(socketPath string, mode Mode, in io.Reader, out io.Writer, opts ClientOptions) (End, error) {
	if mode != Watch && mode != Attach {
		return 0, fmt.Errorf("invalid mode %d", mode)
	}
	conn, err := dialTerminal(socketPath, opts)
	if err != nil {
		return 0, err
	}
	defer conn.Close()

	var tty *os.File
	if f, ok := in.(*os.File); ok && mode == Attach && IsTerminal(f) {
		tty = f
	}
	if _, err := conn.Write(hello(mode, tty, opts.Secret)); err != nil {
		return 0, err
	}

	type result struct {
		end End
		err error
	}
	results := make(chan result, 2)
	outputDone := make(chan struct{})
	if !opts.Raw {
		out = NewControlFilterWriter(out)
	}
	go func() {
		defer close(outputDone)
		err := copyFromServer(conn, out)
		results <- result{EndClosed, err}
	}()

	var reader *stoppableReader
	inputDone := make(chan struct{})
	if mode == Attach {
		if tty != nil {
			fd := descriptor(tty)
			old, err := term.MakeRaw(fd)
			if err != nil {
				return 0, err
			}
			defer term.Restore(fd, old)
			defer forwardWinsize(tty, conn, outputDone)()
		}
		src := in
		if f, ok := in.(*os.File); ok {
			if reader, err = newStoppableReader(f); err != nil {
				return 0, err
			}
			src = reader
		}
		go func() {
			defer close(inputDone)
			detached, err := sendInput(conn, src, tty != nil)
			switch {
			case detached:
				results <- result{EndDetached, nil}
			case err != nil && !errors.Is(err, errStopped) && !errors.Is(err, net.ErrClosed):
				results <- result{EndClosed, err}
			}
		}()
	} else {
		close(inputDone)
	}

	r := <-results
	conn.Close()
	<-outputDone
	if reader != nil {
		reader.Stop()
		<-inputDone
		reader.Close()
	}
	if r.err != nil {
		return 0, r.err
	}
	return r.end, nil
}

// hello is what a client says first: the terminal's secret when it has
// one, its mode, then, from a terminal, that terminal's size.
func hello(mode Mode, tty *os.File, secret string) []byte {
	b := []byte(mode.String() + "\n")
	if secret != "" {
		b = append([]byte(secretPrefix+secret+"\n"), b...)
	}
	if tty != nil {
		if r, c, err := getWinsize(tty); err == nil && r > 0 && c > 0 {
			b = append(b, WinsizeSequence(Winsize{r, c})...)
		}
	}
	return b
}

// dialTerminal connects to the terminal at socketPath and, when opts
// names trusted server uids, checks that one of them serves it.
func dialTerminal(socketPath string, opts ClientOptions) (*net.UnixConn, error) {
	conn, err := fsops.DialUnix(socketPath, dialTimeout)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return nil, &os.PathError{Op: "connect", Path: socketPath, Err: errno}
		}
		return nil, err
	}
	if len(opts.TrustedServerUIDs) > 0 {
		uid, _, err := peerCred(conn)
		if err != nil {
			conn.Close()
			return nil, err
		}
		if !slices.Contains(opts.TrustedServerUIDs, uid) {
			conn.Close()
			return nil, fmt.Errorf("%s: served by uid %d, which is not trusted", socketPath, uid)
		}
	}
	return conn, nil
}

// forwardWinsize sends tty's window size to the terminal after each
// SIGWINCH until done is closed; the returned func stops the signal.
func forwardWinsize(tty *os.File, conn *net.UnixConn, done <-chan struct{}) (stop func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for {
			select {
			case <-winch:
				if r, c, err := getWinsize(tty); err == nil && r > 0 && c > 0 {
					_, _ = conn.Write(WinsizeSequence(Winsize{r, c}))
				}
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(winch) }
}

// sendInput copies input to the terminal until EOF, an error, or (on a
// terminal) the detach sequence.
func sendInput(conn *net.UnixConn, in io.Reader, detachKey bool) (detached bool, err error) {
	buf := make([]byte, 4096)
	var (
		d   = newDetachFilter()
		dst []byte
	)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			p := buf[:n]
			if detachKey {
				dst, detached = d.Filter(dst[:0], p)
				p = dst
			}
			if len(p) > 0 {
				if _, werr := conn.Write(p); werr != nil {
					return false, werr
				}
			}
			if detached {
				return true, nil
			}
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// copyFromServer copies the terminal's output to out until the connection
// closes. The server answers a refused client with one line beginning
// "ctxterm: " and closes, with no PTY byte before it; so while the first
// bytes could still be such a line they are held back, and a line that is
// followed by the close becomes a *RefusedError instead of output.
func copyFromServer(conn *net.UnixConn, out io.Writer) error {
	buf := make([]byte, 32<<10)
	var head []byte
	deciding := true
	for {
		n, rerr := conn.Read(buf)
		if errors.Is(rerr, syscall.ECONNRESET) {
			// The server closed with our input unread: after a refusal
			// line that is how the close may arrive.
			rerr = io.EOF
		}
		if deciding {
			head = append(head, buf[:n]...)
			timedOut := errors.Is(rerr, os.ErrDeadlineExceeded)
			switch state := refusalState(head); {
			case state == refusalComplete && rerr == io.EOF:
				line := bytes.TrimSuffix(head[len(refusalPrefix):], []byte("\n"))
				reason, text, _ := bytes.Cut(line, []byte(": "))
				return &RefusedError{Reason: string(reason), Text: string(text)}
			case state == refusalNo || timedOut || (rerr != nil && rerr != io.EOF):
				deciding = false
				_ = conn.SetReadDeadline(time.Time{})
				if _, err := out.Write(head); err != nil {
					return err
				}
				if timedOut {
					continue
				}
			case state == refusalComplete:
				_ = conn.SetReadDeadline(time.Now().Add(refusalLinger))
			}
			if deciding && rerr == io.EOF {
				_, err := out.Write(head)
				return err
			}
		} else if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF || errors.Is(rerr, net.ErrClosed) {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

type refusalShape int

const (
	refusalMaybe    refusalShape = iota // could still become a refusal line
	refusalComplete                     // exactly one line "ctxterm: ...\n"
	refusalNo                           // output
)

func refusalState(head []byte) refusalShape {
	if len(head) < len(refusalPrefix) {
		if bytes.HasPrefix([]byte(refusalPrefix), head) {
			return refusalMaybe
		}
		return refusalNo
	}
	if !bytes.HasPrefix(head, []byte(refusalPrefix)) {
		return refusalNo
	}
	switch i := bytes.IndexByte(head, '\n'); {
	case i < 0 && len(head) < maxRefusal:
		return refusalMaybe
	case i == len(head)-1:
		return refusalComplete
	}
	return refusalNo
}

// detachFilter finds the detach sequence (see DetachSequence) in typed
// input.
type detachFilter struct {
	lineStart bool // the next byte starts a line
	tilde     bool // a "~" at a line start is held
}

func newDetachFilter() *detachFilter { return &detachFilter{lineStart: true} }

// Filter appends to dst the bytes of p to send and reports whether the
// detach sequence was completed; bytes after it are not sent.
func (d *detachFilter) Filter(dst, p []byte) ([]byte, bool) {
	for _, c := range p {
		switch {
		case d.tilde:
			d.tilde = false
			switch c {
			case '.':
				return dst, true
			case '~':
				dst = append(dst, '~')
				d.lineStart = false
				continue
			}
			dst = append(dst, '~', c)
		case d.lineStart && c == '~':
			d.tilde = true
			continue
		default:
			dst = append(dst, c)
		}
		d.lineStart = c == '\r' || c == '\n'
	}
	return dst, false
}
