package ptyterm

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

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

// console is the running local console.
type console struct {
	out     io.Writer
	reader  *stoppableReader
	done    chan struct{}
	restore func()
}

func startConsole(cfg Config, ttyIn *os.File, h *hub, veof byte) (*console, error) {
	con := &console{done: make(chan struct{})}
	if cfg.Console == ConsoleNone {
		// No console: ConsoleOut (the caller's terminal, which a run
		// started with --no-console leaves to ctx's own lines) gets
		// none of the program's output.
		close(con.done)
		return con, nil
	}
	con.out = cfg.ConsoleOut
	if con.out != nil && !cfg.ConsoleRaw && IsTerminal(con.out) {
		con.out = NewControlFilterWriter(con.out)
	}
	if cfg.ConsoleIn == nil {
		close(con.done)
		return con, nil
	}
	in := cfg.ConsoleIn
	if f, ok := in.(*os.File); ok {
		r, err := newStoppableReader(f)
		if err != nil {
			close(con.done)
			return con, err
		}
		con.reader, in = r, r
	}
	h.claimConsole()
	if ttyIn != nil {
		fd := descriptor(ttyIn)
		old, err := term.MakeRaw(fd)
		if err != nil {
			h.releaseConsole()
			close(con.done)
			return con, err
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		stopWinch := make(chan struct{})
		go func() {
			for {
				select {
				case <-winch:
					if r, c, err := getWinsize(ttyIn); err == nil && r > 0 && c > 0 {
						h.Resize(Winsize{r, c})
					}
				case <-stopWinch:
					return
				}
			}
		}()
		con.restore = func() {
			signal.Stop(winch)
			close(stopWinch)
			_ = term.Restore(fd, old) // best effort: the terminal may be gone
		}
	}
	go func() {
		defer close(con.done)
		defer h.releaseConsole()
		last, err := copyInput(h.pty, in)
		if err == nil && cfg.Console == ConsolePipe {
			eof := []byte{veof}
			if last != '\n' {
				eof = append(eof, veof)
			}
			_, _ = h.pty.Write(eof)
		}
	}()
	return con, nil
}

// copyInput copies console input to the PTY until EOF (nil error) or
// failure, and returns the last byte copied.
func copyInput(pty *os.File, in io.Reader) (byte, error) {
	buf := make([]byte, 32<<10)
	last := byte('\n')
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if _, werr := pty.Write(buf[:n]); werr != nil {
				return last, werr
			}
			last = buf[n-1]
		}
		if err == io.EOF {
			return last, nil
		}
		if err != nil {
			return last, err
		}
	}
}

// write copies output to the console; after a failed write (a closed pipe,
// a hung-up terminal) the console gets no more output.
func (c *console) write(p []byte, logf func(string, ...any)) {
	if c.out == nil {
		return
	}
	if _, err := c.out.Write(p); err != nil {
		if !errors.Is(err, syscall.EPIPE) {
			logf("console output stopped: %v", err)
		}
		c.out = nil
	}
}

// stop ends console input and restores the local terminal. A console
// reader that is not a file cannot be interrupted; its goroutine ends at
// its next read, when writing to the closed PTY fails.
func (c *console) stop() {
	if c.reader != nil {
		c.reader.Stop()
		<-c.done // the PTY is closed, so no input write can block
		c.reader.Close()
	}
	if c.restore != nil {
		c.restore()
	}
}
