package fsops

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The acts of running a tool's file that tsh and /mnt/tools need: the
// file opened once and executed through that descriptor (so what the
// authority check saw is what runs), the run capability's descriptor kept
// at its number, and an execve in place of the caller.

// OpenExecutable opens path to be executed through its descriptor: O_PATH
// (no read permission needed, so an execute-only tool still runs),
// close-on-exec, never following a symlink. It returns the file and what
// fstat says of it.
func OpenExecutable(path string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), st, nil
}

// DupAbove returns a close-on-exec duplicate of descriptor fd numbered min
// or above.
func DupAbove(fd, min int, name string) (*os.File, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, min)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(dup), name), nil
}

// FDOpen reports whether descriptor fd is open in this process.
func FDOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// ExecProgram replaces this process with the program at path (execve): it
// returns only when that fails.
func ExecProgram(path string, argv, env []string) error {
	return syscall.Exec(path, argv, env)
}

// WarmProcessStart makes the Go runtime's one check of pidfd support now.
// The os package makes it before a process's first process start (a
// pidfd of its own, a wait, a signal, and a child cloned and reaped), and
// caches the answer; made ahead on another goroutine, it leaves the
// critical path of the first start: the init's, in the run host, and the
// agent program's, in the init.
func WarmProcessStart() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Release()
	}
}
