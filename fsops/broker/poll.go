package broker

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Waiting through Go's netpoller. A goroutine blocked in a system call on
// a raw descriptor (recvmsg, accept4, poll) holds a thread and, to the Go
// scheduler, a P "in a system call"; with two of them on a two-CPU
// machine no P is idle, and the runtime's monitor thread wakes every 20
// microseconds to take the P back and hand it on, for as long as they
// wait. The run host and the init wait on several descriptors at once
// for the whole run (the listener, the order channel, each call's
// connection, a worker's socket), so that monitor ran between every two
// calls. A pollable file (Pollable) waits in the netpoller instead: the
// goroutine is parked, its P idle, and the monitor sleeps.
//
// A pollable file's description is non-blocking, which a raw descriptor
// sharing it (a dup, the same socket end used through Send or Recv by
// number) sees too: Send and Recv on a raw descriptor wait in poll(2)
// when the kernel says EAGAIN on a non-blocking one, so they block as
// before.

// Pollable makes fd non-blocking and returns it as a file whose waits
// go through the netpoller. The file owns fd: it is closed by closing the
// file, which also wakes whoever waits on it (ErrClosed). A descriptor
// that cannot be made non-blocking (none that is open) gives a file whose
// waits fail at once rather than block.
func Pollable(fd int, name string) *os.File {
	unix.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), name)
}

// PollableDup is Pollable on a close-on-exec duplicate of fd, which the
// caller keeps (their description, now non-blocking, is shared).
func PollableDup(fd int, name string) (*os.File, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return Pollable(dup, name), nil
}

// RecvFile is Recv on a pollable file (Pollable), waiting in the
// netpoller, until f's read deadline when it has one
// (os.ErrDeadlineExceeded). A file closed meanwhile ends it with
// ErrClosed.
func RecvFile(f *os.File, v any, max int) ([]*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, pollErr(err)
	}
	var files []*os.File
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		files, rerr = recv(int(fd), v, max, unix.MSG_DONTWAIT)
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return nil, pollErr(err)
	}
	return files, rerr
}

// SendFile is Send on a pollable file, waiting in the netpoller while the
// peer's queue is full.
func SendFile(f *os.File, v any, fds []int) error {
	b, oob, err := encode(v, fds)
	if err != nil {
		return err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return pollErr(err)
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = sendmsg(int(fd), b, oob, unix.MSG_DONTWAIT)
		return serr != unix.EAGAIN
	})
	if err != nil {
		return pollErr(err)
	}
	return serr
}

// AwaitHangupFile is AwaitHangup on a pollable file: it also returns when
// the file is closed.
func AwaitHangupFile(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 1)
	rc.Read(func(fd uintptr) bool {
		for {
			n, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			switch {
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return false // nothing yet: wait for more
			case n <= 0 || err != nil:
				return true
			}
		}
	})
}

// SetRecvDeadline bounds the waits of RecvFile on f until t; the zero
// time waits without a bound again.
func SetRecvDeadline(f *os.File, t time.Time) { f.SetReadDeadline(t) }

// Listener is the broker's listening socket, accepted on through the
// netpoller.
type Listener struct{ f *os.File }

// Accept waits for the next connection and returns it close-on-exec
// and non-blocking (Pollable takes it as is). A signal or a caller that
// went away before it was taken is not an end: it waits on. Any other
// error (the listener closed, ErrClosed) is returned.
func (l *Listener) Accept() (int, error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return -1, pollErr(err)
	}
	conn := -1
	var aerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			conn, _, aerr = unix.Accept4(int(fd), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
			if aerr != unix.EINTR && aerr != unix.ECONNABORTED {
				return aerr != unix.EAGAIN
			}
		}
	})
	if err != nil {
		return -1, pollErr(err)
	}
	return conn, aerr
}

// Close closes the listener, which wakes an Accept waiting on it.
func (l *Listener) Close() error { return l.f.Close() }

// pollErr is ErrClosed for a file closed under a wait, else err.
func pollErr(err error) error {
	if errors.Is(err, os.ErrClosed) || errors.Is(err, fileClosing()) {
		return ErrClosed
	}
	return err
}

// fileClosing is the error a raw read of a closed file returns (the
// poller's ErrFileClosing, which os does not export), found once, when
// first needed, from a file closed for the purpose.
var fileClosing = sync.OnceValue(func() error {
	var p [2]int
	if unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK) != nil {
		return os.ErrClosed
	}
	unix.Close(p[1])
	f := os.NewFile(uintptr(p[0]), "closed")
	rc, err := f.SyscallConn()
	f.Close()
	if err != nil {
		return os.ErrClosed
	}
	return rc.Read(func(uintptr) bool { return true })
})

// awaitReady waits in poll(2) until fd can be read (or written, out) when
// a system call on a raw, non-blocking descriptor said EAGAIN: a raw
// descriptor blocks as it did before its description was made pollable.
// It reports false when fd is blocking (EAGAIN was a receive timeout,
// SO_RCVTIMEO, and stands) or cannot be polled.
func awaitReady(fd int, out bool) bool {
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
		return false
	}
	ev := int16(unix.POLLIN)
	if out {
		ev = unix.POLLOUT
	}
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: ev}}, -1)
		if err != unix.EINTR {
			return err == nil
		}
	}
}
