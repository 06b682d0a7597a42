package fsops

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ControlLimit bounds every control file read: 64 KiB.
const ControlLimit = 64 << 10

// ReadControl reads a control file without following a symlink in its final
// component, refusing anything that is not a regular file or is larger than
// ControlLimit.
func ReadControl(path string) ([]byte, error) {
	return ReadRegular(path, ControlLimit)
}

// ReadRegular reads at most limit bytes of the regular file at path. A
// symlink in the final component is refused (ELOOP), as are non-regular
// files (EINVAL) and files larger than limit (EFBIG). FIFOs are opened
// non-blocking so a planted FIFO cannot hang the reader.
//
// It works on the bare descriptor, not an *os.File: a file opened
// O_NONBLOCK is registered with Go's poller, and the first one sets the
// poller up (an epoll instance, an eventfd, their registration), which a
// short-lived tool paid on its first control file read.
func ReadRegular(path string, limit int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: noFollowErr(err)}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := fstatRetry(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &os.PathError{Op: "open", Path: path, Err: notRegular(fileMode(st.Mode))}
	}
	// The size is a hint (the file may change as it is read): the buffer
	// starts one byte past it, and a read that fills limit+1 bytes shows
	// the file is too large.
	buf := make([]byte, min(max(st.Size, 0), limit)+1)
	n := 0
	for {
		if n == len(buf) {
			if int64(n) > limit {
				return nil, &os.PathError{Op: "read", Path: path, Err: syscall.EFBIG}
			}
			buf = append(buf, make([]byte, min(int64(len(buf)), limit+1-int64(len(buf))))...)
		}
		m, err := unix.Read(fd, buf[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			// Regular files ignore O_NONBLOCK, except on a filesystem
			// that does not: read blocking, as a reader expects.
			if err := unix.SetNonblock(fd, false); err != nil {
				return nil, &os.PathError{Op: "read", Path: path, Err: err}
			}
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case m == 0:
			return buf[:n], nil
		}
		n += m
		if int64(n) == st.Size && n < len(buf) {
			// Exactly the size fstat gave, though more was asked for: the
			// end of the file, without a read(2) to be told so. (A file
			// whose size stat does not know, as in /proc, says 0 and is
			// read to the end.)
			return buf[:n], nil
		}
	}
}

// fstatRetry is fstat(2), repeated when a signal interrupts it.
func fstatRetry(fd int, st *unix.Stat_t) error {
	for {
		if err := unix.Fstat(fd, st); err != unix.EINTR {
			return err
		}
	}
}

// fileMode is the os.FileMode type bits of a stat mode, for notRegular.
func fileMode(mode uint32) os.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return os.ModeDir
	case unix.S_IFIFO:
		return os.ModeNamedPipe
	case unix.S_IFLNK:
		return os.ModeSymlink
	case unix.S_IFSOCK:
		return os.ModeSocket
	case unix.S_IFCHR:
		return os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		return os.ModeDevice
	}
	return 0
}

// OpenRegular opens path read-only without following a symlink in the final
// component and checks that it is a regular file.
func OpenRegular(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: noFollowErr(err)}
	}
	f := os.NewFile(uintptr(fd), path)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: notRegular(st.Mode())}
	}
	// Regular files ignore O_NONBLOCK; clear it anyway so the descriptor
	// behaves normally if handed on.
	_ = unix.SetNonblock(fd, false)
	return f, nil
}

func readLimited(f io.Reader, path string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(b)) > limit {
		return nil, &os.PathError{Op: "read", Path: path, Err: syscall.EFBIG}
	}
	return b, nil
}

// ReadLimited reads all of r, at most limit bytes: more is an error
// wrapping EFBIG (nothing partial is returned). name labels the errors
// ("-" for standard input).
func ReadLimited(r io.Reader, name string, limit int64) ([]byte, error) {
	return readLimited(r, name, limit)
}

// noFollowErr turns the ELOOP that O_NOFOLLOW gives for a symlink into a
// clearer error while keeping the errno.
func noFollowErr(err error) error {
	if err == unix.ELOOP {
		return ErrSymlink
	}
	return err
}

// ErrSymlink is returned (wrapped in a PathError) when a symlink stands
// where a file or directory is expected. Its errno is ELOOP.
var ErrSymlink = errnoError{unix.ELOOP, "is a symlink (not followed)"}

// ErrNotRegular is returned for directories, FIFOs, devices and sockets
// where a regular file is expected. Its errno is EINVAL.
var ErrNotRegular = errnoError{unix.EINVAL, "not a regular file"}

func notRegular(m os.FileMode) error {
	if m.IsDir() {
		return errnoError{unix.EISDIR, "is a directory"}
	}
	return ErrNotRegular
}

// errnoError is an error with a clear message that still unwraps to its
// errno, so callers can report the errno name.
type errnoError struct {
	errno syscall.Errno
	msg   string
}

func (e errnoError) Error() string { return e.msg }
func (e errnoError) Unwrap() error { return e.errno }
