package ptyterm

import (
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openPTY opens a new pseudo-terminal pair and sets its window size.
//
// creack/pty allocates the pair, but its ioctls go through File.Fd, which
// switches the master back to blocking mode: a goroutine blocked in Read on
// such a file cannot be woken by Close. ctxterm must be able to stop reading
// when the command has exited but a background process still holds the
// slave open, so the master is duplicated into a non-blocking descriptor
// that the Go poller manages, and every later ioctl goes through
// SyscallConn instead of Fd.
func openPTY(rows, cols uint16) (master, tty *os.File, err error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	fd, err := unix.FcntlInt(ptmx.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	_ = ptmx.Close() // the duplicate keeps the master open
	if err != nil {
		_ = tty.Close() // best effort
		return nil, nil, &os.PathError{Op: "dup", Path: "/dev/ptmx", Err: err}
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		_ = tty.Close() // best effort
		return nil, nil, &os.PathError{Op: "fcntl", Path: "/dev/ptmx", Err: err}
	}
	// os.NewFile registers a non-blocking descriptor with the poller.
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := setWinsize(master, rows, cols); err != nil {
		_ = master.Close() // best effort
		_ = tty.Close()    // best effort
		return nil, nil, err
	}
	return master, tty, nil
}

// setWinsize sets the window size of the terminal f; the kernel sends
// SIGWINCH to the terminal's foreground process group.
func setWinsize(f *os.File, rows, cols uint16) error {
	return fileIoctl(f, "TIOCSWINSZ", func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
}

// getWinsize returns the window size of the terminal f.
func getWinsize(f *os.File) (rows, cols uint16, err error) {
	err = fileIoctl(f, "TIOCGWINSZ", func(fd int) error {
		ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
		if err == nil {
			rows, cols = ws.Row, ws.Col
		}
		return err
	})
	return rows, cols, err
}

// fileIoctl runs op on f's descriptor without File.Fd, which would put a
// poller-managed file into blocking mode.
func fileIoctl(f *os.File, name string, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = op(int(fd)) }); err != nil {
		return err
	}
	if opErr != nil {
		return &os.PathError{Op: name, Path: f.Name(), Err: opErr}
	}
	return nil
}

// eofChar returns the VEOF character of the terminal tty (Ctrl-D unless the
// program changed it).
func eofChar(tty *os.File) byte {
	c := byte(4)
	_ = fileIoctl(tty, "TCGETS", func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err == nil && t.Cc[unix.VEOF] != 0 {
			c = t.Cc[unix.VEOF]
		}
		return err
	})
	return c
}
