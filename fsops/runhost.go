package fsops

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The acts of the run host (applets/agentrun*.go, ctx_agent_*.go,
// runhost_broker*.go) on its broker's connections, its processes and
// inodes, so that no applet calls the kernel itself. Each is one system
// call (or a short loop of one) with the flags the run host used inline.

// AcceptBroker waits for the next connection on the broker's listening
// socket (ListenBroker) and returns it close-on-exec. A signal or a caller
// that went away before it was taken is not an end: it waits on. Any other
// error (the socket shut down by CloseBrokerListener) is returned.
func AcceptBroker(listen int) (int, error) {
	for {
		conn, _, err := unix.Accept4(listen, unix.SOCK_CLOEXEC)
		if err == unix.EINTR || err == unix.ECONNABORTED {
			continue
		}
		return conn, err
	}
}

// CloseBrokerListener shuts the broker's listening socket down, which
// wakes an AcceptBroker blocked on it, and closes it.
func CloseBrokerListener(listen int) {
	unix.Shutdown(listen, unix.SHUT_RDWR)
	unix.Close(listen)
}

// StopBrokerReads shuts the reading side of the host's end of the order
// channel: a receive takes the messages queued and then sees the end,
// and one blocked wakes (the run's end lets its last reports be read).
func StopBrokerReads(host *os.File) {
	unix.Shutdown(int(host.Fd()), unix.SHUT_RD)
}

// SetBrokerRecvTimeout bounds every later receive on conn to d
// (SO_RCVTIMEO, to the microsecond); zero waits without a bound again.
func SetBrokerRecvTimeout(conn int, d time.Duration) {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	unix.SetsockoptTimeval(conn, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

// ShutdownBroker wakes whoever waits on conn (a receive returns end of
// file) without closing the descriptor, which its owner still does.
func ShutdownBroker(conn int) { unix.Shutdown(conn, unix.SHUT_RDWR) }

// BrokerPeer is the pid and uid of the process at the other end of conn
// (SO_PEERCRED, as the kernel recorded them at connect).
func BrokerPeer(conn int) (pid, uid int, err error) {
	cred, err := unix.GetsockoptUcred(conn, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, 0, err
	}
	return int(cred.Pid), int(cred.Uid), nil
}

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5, the asm-generic value that
// amd64 and arm64 use), which x/sys does not name yet.
const soPeerPidfd = 77

// BrokerPeerStill calls check with the pid of the process at the other
// end of conn and reports whether check held and that very process was
// still unreaped afterwards, so its pid had not been reused by another
// process meanwhile (a pidfd from SO_PEERPIDFD pins it; a kernel without
// one leaves the pid alone to decide).
func BrokerPeerStill(conn, pid int, check func(pid int) bool) bool {
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

// AwaitBrokerHangup returns when the caller at the other end of conn has
// gone: it closed its end, or the connection failed. Anything it sends
// meanwhile is read and dropped.
func AwaitBrokerHangup(conn int) {
	buf := make([]byte, 1)
	for {
		n, _, err := unix.Recvfrom(conn, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return
		}
	}
}

// CheckAppendable opens path for appending and closes it again: nil when
// a line could be appended now. It follows no symlink in the last
// component and never waits (a FIFO put there is not a way to block).
func CheckAppendable(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// Stat is stat(2): the record of the inode path leads to (symlinks
// followed), with the fields os.FileInfo leaves in Sys.
func Stat(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Stat(path, &st)
	return st, err
}

// SameInode reports whether paths a and b lead to the same inode (both
// followed through symlinks); false when either cannot be looked at.
func SameInode(a, b string) bool {
	sa, errA := Stat(a)
	if errA != nil {
		return false
	}
	sb, errB := Stat(b)
	return errB == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// StatNoSymlinks is the record of the inode at path (absolute), reached
// without following a symlink in any component (OpenNoSymlinks: a
// symlink on the way is ELOOP).
func StatNoSymlinks(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := OpenNoSymlinks(path)
	if err != nil {
		return st, err
	}
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	return st, err
}

// MayCreateIn reports whether this process may make entries in directory
// dir (access(2) with W_OK and X_OK: the real uid's permission).
func MayCreateIn(dir string) bool { return unix.Access(dir, unix.W_OK|unix.X_OK) == nil }

// SignalProcess sends sig to process pid (kill(2)).
func SignalProcess(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// SignalGroup sends sig to every process of the process group pgid
// (kill(2) of -pgid).
func SignalGroup(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }
