package fsops

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The small acts adapters need on descriptors, processes and inodes, so
// that no applet calls the kernel itself: each is one system call (or a
// short loop of one) with the flags that make it safe here.

// CloseFD closes a descriptor that an fsops call returned as a number
// (broker.Dial, OpenNoSymlinks).
func CloseFD(fd int) { unix.Close(fd) }

// Writable reports whether this process may write in path (access(2) with
// W_OK: the real uid's permission, as a shell's test -w).
func Writable(path string) bool { return unix.Access(path, unix.W_OK) == nil }

// Lstat is lstat(2): the inode's record, a symlink's own, with the fields
// os.FileInfo leaves in Sys.
func Lstat(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	return st, err
}

// OpenDirNoFollow opens path as a directory for listing, refusing a
// symlink in its last component with the bare errno ELOOP (callers name
// that case themselves) and anything but a directory with ENOTDIR.
func OpenDirNoFollow(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// LstatAt is fstatat(2) of name in the open directory dir, not following a
// symlink: the entry as it is in that directory, whatever its path became.
func LstatAt(dir *os.File, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// PrivateDir reports whether dir is a directory (not a symlink) of this
// process's effective uid that no one else may enter.
func PrivateDir(dir string) bool {
	st, err := Lstat(dir)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR &&
		int(st.Uid) == os.Geteuid() && st.Mode&0o077 == 0
}

// TryLock takes f's exclusive flock(2) without waiting: nil when taken,
// EWOULDBLOCK when another holds it (EINTR when interrupted). Closing f
// releases it.
func TryLock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }

// ProcessUID is the uid that owns process pid (its /proc directory's
// owner), or the error that says it is gone.
func ProcessUID(pid int) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		return 0, err
	}
	return int(st.Uid), nil
}

// ExistingRuntimeDir is uid's runtime directory when it already exists, in
// RuntimeDir's places and order, for a caller that looks at another user's
// runs: it makes nothing (a directory made there for that user would be
// skipped by their runs as squatted).
func ExistingRuntimeDir(uid int) (string, []string) {
	id := strconv.Itoa(uid)
	var candidates []string
	if st, err := os.Stat(filepath.Join("/run/user", id)); err == nil && st.IsDir() {
		candidates = append(candidates, filepath.Join("/run/user", id, "cortexfs"))
	}
	candidates = append(candidates, filepath.Join("/run/cortexfs", id))
	candidates = appendTempCandidates(candidates, "cortexfs-"+id)
	for _, c := range candidates {
		if st, err := Lstat(c); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == uid {
			return c, nil
		}
	}
	return "", candidates
}

// Process is a process held by a pidfd: its signals and its wait reach the
// process it named when opened, never another that reused its pid.
type Process struct {
	fd int
}

// OpenProcess takes hold of process pid.
func OpenProcess(pid int) (*Process, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	return &Process{fd: fd}, nil
}

// FD is the process's pidfd, valid until Close.
func (p *Process) FD() int { return p.fd }

// Signal sends sig to the process (pidfd_send_signal(2)).
func (p *Process) Signal(sig syscall.Signal) error {
	return unix.PidfdSendSignal(p.fd, sig, nil, 0)
}

// Wait waits until the process has exited, at most timeout, and reports
// whether it has. A zero timeout only looks.
func (p *Process) Wait(timeout time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		ms := int(left.Milliseconds()) + 1
		if timeout == 0 {
			ms = 0
		} else if left <= 0 {
			return false
		}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// Close lets go of the process.
func (p *Process) Close() { unix.Close(p.fd) }

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
