package broker

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The acts on the broker's connections, the run host's (its listener,
// its callers, the order channel) and a caller's (cancelling, its peer),
// so that no applet calls the kernel itself. Each is one system call (or
// a short loop of one) with the flags the run host used inline; the waits
// on them are in poll.go.

// StopReads shuts the reading side of the host's end of the order
// channel: a receive takes the messages queued and then sees the end,
// and one blocked wakes (the run's end lets its last reports be read).
func StopReads(host *os.File) {
	if rc, err := host.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RD) })
	}
}

// RecvWithin is Recv of one message without descriptors on a blocking
// conn, waiting at most d (SO_RCVTIMEO): got is false when nothing came
// by then, and later receives on conn wait without a bound again.
func RecvWithin(conn int, v any, d time.Duration) (got bool, err error) {
	setRecvTimeout(conn, d)
	if _, err = Recv(conn, v, 0); err == unix.EAGAIN {
		setRecvTimeout(conn, 0)
		return false, nil
	}
	return err == nil, err
}

// setRecvTimeout bounds every later receive on conn to d; zero waits
// without a bound again.
func setRecvTimeout(conn int, d time.Duration) {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	unix.SetsockoptTimeval(conn, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

// Shutdown wakes whoever waits on conn (a receive returns end of
// file) without closing the descriptor, which its owner still does.
func Shutdown(conn int) { unix.Shutdown(conn, unix.SHUT_RDWR) }

// Peer is the pid and uid of the process at the other end of conn
// (SO_PEERCRED, as the kernel recorded them at connect).
func Peer(conn int) (pid, uid int, err error) {
	cred, err := unix.GetsockoptUcred(conn, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, 0, err
	}
	return int(cred.Pid), int(cred.Uid), nil
}

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5, the asm-generic value that
// amd64 and arm64 use), which x/sys does not name yet.
const soPeerPidfd = 77

// PeerStill calls check with the pid of the process at the other
// end of conn and reports whether check held and that very process was
// still unreaped afterwards, so its pid had not been reused by another
// process meanwhile (a pidfd from SO_PEERPIDFD pins it; a kernel without
// one leaves the pid alone to decide).
func PeerStill(conn, pid int, check func(pid int) bool) bool {
	pidfd, err := unix.GetsockoptInt(conn, unix.SOL_SOCKET, soPeerPidfd)
	if err != nil {
		return check(pid)
	}
	defer unix.Close(pidfd)
	if !check(pid) {
		return false
	}
	err = unix.PidfdSendSignal(pidfd, 0, nil, 0)
	return err == nil || err == unix.EPERM // EPERM: it exists, as another uid
}

// Cancel shuts a broker connection down in both directions: the run
// host sees the call's connection end and ends the call's process tree,
// while this process still holds (and later closes) the descriptor.
func Cancel(conn int) { unix.Shutdown(conn, unix.SHUT_RDWR) }

// CancelCall ends this process's side of a call's connection only:
// the run host sees it end and ends the call's process tree, and can still
// answer once that tree is gone.
func CancelCall(conn int) { unix.Shutdown(conn, unix.SHUT_WR) }

// PeerPid is the pid of the process that listens at the other end of
// conn (SO_PEERCRED, as the kernel recorded it at connect).
func PeerPid(conn int) (int, error) {
	cred, err := unix.GetsockoptUcred(conn, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, err
	}
	return int(cred.Pid), nil
}
