package ptyterm

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// ConsoleMode says what ctxterm does with its own standard input and
// output, the "local console".
type ConsoleMode int

const (
	// ConsoleNone: the terminal is reachable only through its socket.
	ConsoleNone ConsoleMode = iota
	// ConsoleTTY: ctxterm runs on a terminal and acts as an implicit
	// attacher for the whole session: the local terminal goes into raw
	// mode (restored on exit), its input goes to the PTY unfiltered, the
	// PTY output comes back, and its window size follows SIGWINCH. It holds
	// the attach slot, so socket clients can watch but not attach.
	ConsoleTTY
	// ConsolePipe: for scripts and CI. Input is copied to the PTY until
	// EOF, then the terminal's EOF character (VEOF, Ctrl-D by default) is
	// written once, twice when the input did not end in a newline (the
	// first only ends the partial line), as script(1) does. The attach
	// slot is held until that EOF. Output is copied to the console output.
	ConsolePipe
)

// ConsoleModeFor returns ConsoleTTY when in is a terminal and ConsolePipe
// otherwise.
func ConsoleModeFor(in io.Reader) ConsoleMode {
	if IsTerminal(in) {
		return ConsoleTTY
	}
	return ConsolePipe
}

// IsTerminal reports whether v is a file open on a terminal: the one test
// ctx uses everywhere (x/term's). It reaches the descriptor through its raw
// connection, not Fd(), which would put a non-blocking file (a terminal
// shared with the shell that started us) into blocking mode.
func IsTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok || f == nil {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	is := false
	if rc.Control(func(fd uintptr) { is = term.IsTerminal(int(fd)) }) != nil {
		return false
	}
	return is
}

var errStopped = errors.New("console input stopped")

// stoppableReader reads a file descriptor without changing its flags (a
// terminal's O_NONBLOCK is shared with the shell that started us) and
// can be stopped: Read waits in poll(2) on the descriptor and a wake-up
// pipe. Without it, a goroutine blocked reading the console would outlive
// Serve and swallow a key meant for the next program.
type stoppableReader struct {
	fd           int
	wakeR, wakeW int
}

func newStoppableReader(f *os.File) (*stoppableReader, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	return &stoppableReader{fd: descriptor(f), wakeR: p[0], wakeW: p[1]}, nil
}

func (r *stoppableReader) Read(p []byte) (int, error) {
	for {
		fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}, {Fd: int32(r.wakeR), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return 0, err
		}
		if fds[1].Revents != 0 {
			return 0, errStopped
		}
		if fds[0].Revents&unix.POLLNVAL != 0 {
			return 0, unix.EBADF
		}
		if fds[0].Revents == 0 {
			continue
		}
		n, err := unix.Read(r.fd, p)
		switch {
		case err == unix.EINTR || err == unix.EAGAIN:
			continue
		case err == unix.EIO:
			return 0, io.EOF // a hung-up terminal
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Stop makes every pending and later Read return errStopped. It does not
// close the watched descriptor, which belongs to the caller.
func (r *stoppableReader) Stop() {
	_, _ = unix.Write(r.wakeW, []byte{0})
}

func (r *stoppableReader) Close() {
	unix.Close(r.wakeR)
	unix.Close(r.wakeW)
}
