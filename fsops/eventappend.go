package fsops

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Appending to an event stream (events.jsonl, tool/T.d/log,
// agent/A.d/log) never leaves a torn line (DESIGN §16, rule 15): a line
// is one write under O_APPEND, and a write the disk could not take whole
// is rolled back, the file truncated to where the line began, so the next
// line never lands on a partial one. Writers hold the file's flock while
// they append; the lock is only ever tried for appendLockWait, since an
// agent can open a tool's log read-only (its .d is bound into the
// sandbox) and hold it: it can delay an append by that much, never stop
// it. Without the lock the rollback still truncates only when the file
// still ends where this line ended.

// LogRotateBytes is the size at which a shared log (tool/T.d/log,
// agent/A.d/log) is rotated: the append that finds the log at or over it
// renames it LOG.1 (replacing the previous LOG.1) and starts LOG afresh.
// It equals the default log_bytes budget, so one run's lines fit in one
// file. A variable for tests.
var LogRotateBytes int64 = 16 << 20

// appendLockWait bounds how long an append tries the file's lock.
const appendLockWait = 50 * time.Millisecond

// AppendLine appends one complete line to path, whole or not at all. It
// works on the bare descriptor, as ReadRegular does, so that a tool's one
// event does not set up Go's poller. The file is created 0644 when
// missing; a symlink or non-regular file is refused.
func AppendLine(path string, line []byte) error {
	return appendLine(path, line, 0)
}

// AppendLog is AppendLine for a shared log, rotated at LogRotateBytes.
func AppendLog(path string, line []byte) error {
	return appendLine(path, line, LogRotateBytes)
}

// AppendLogEvent appends ev to a shared log (AppendLog).
func AppendLogEvent(path string, ev Event) error {
	return AppendLog(path, ev.Line())
}

func appendLine(path string, line []byte, rotate int64) error {
	for attempt := 0; ; attempt++ {
		fd, st, err := openAppend(path, unix.O_CREAT)
		if err != nil {
			return err
		}
		locked := lockAppend(fd)
		if locked {
			fstatRetry(fd, &st) // its size now, under the lock
		}
		if rotate > 0 && locked && st.Size >= rotate && attempt < 3 {
			err := rotateLog(path, st)
			unix.Close(fd)
			if err != nil {
				return &os.PathError{Op: "rotate", Path: path, Err: err}
			}
			continue // append to the log as it is now
		}
		err = writeWhole(fd, line)
		unix.Close(fd) // releases the lock
		if err != nil {
			return &os.PathError{Op: "append", Path: path, Err: err}
		}
		return nil
	}
}

// openAppend opens path for appending (flags adds O_CREAT or not) without
// following a symlink or waiting on a FIFO, and checks it is a regular file.
func openAppend(path string, flags int) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	flags |= unix.O_WRONLY | unix.O_APPEND | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	fd, err := unix.Open(path, flags, 0o644)
	for err == unix.EINTR {
		fd, err = unix.Open(path, flags, 0o644)
	}
	if err != nil {
		return -1, st, &os.PathError{Op: "open", Path: path, Err: noFollowErr(err)}
	}
	if err := fstatRetry(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, st, &os.PathError{Op: "append", Path: path, Err: notRegular(fileMode(st.Mode))}
	}
	return fd, st, nil
}

// lockAppend takes fd's exclusive flock, trying for appendLockWait.
func lockAppend(fd int) bool {
	deadline := time.Now().Add(appendLockWait)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return true
		}
		if (err != unix.EWOULDBLOCK && err != unix.EINTR) || time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// writeWhole writes line at the end of fd (O_APPEND), retrying after a
// partial write; when the rest cannot be written the part that was is
// truncated away again, if the file still ends with it.
func writeWhole(fd int, line []byte) error {
	written := 0
	for written < len(line) {
		n, err := unix.Write(fd, line[written:])
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == 0 {
			err = io.ErrShortWrite
		}
		if err != nil {
			if written > 0 {
				rollback(fd, int64(written))
			}
			return err
		}
		written += n
	}
	return nil
}

// rollback truncates the last written bytes of fd away, when the file
// still ends where they did (under O_APPEND a write leaves the offset at
// its end).
func rollback(fd int, written int64) {
	end, err := unix.Seek(fd, 0, io.SeekCurrent)
	var st unix.Stat_t
	if err != nil || fstatRetry(fd, &st) != nil || st.Size != end {
		return
	}
	for unix.Ftruncate(fd, end-written) == unix.EINTR {
	}
}

// rotateLog renames the log at path, whose descriptor (locked) was
// stat'ed as st, to path.1, when path still names that file (another
// appender may have rotated it already), and creates the new log with the
// old one's owner and mode. A writer that opened the old file before the
// rename appends to path.1: its line is kept.
func rotateLog(path string, st unix.Stat_t) error {
	var now unix.Stat_t
	if err := unix.Lstat(path, &now); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		return nil
	}
	if err := unix.Rename(path, path+".1"); err != nil {
		return err
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, st.Mode&0o7777)
	if err == unix.EEXIST {
		return nil // another appender made it first
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	unix.Fchown(fd, int(st.Uid), int(st.Gid)) // best effort: root keeps the tree owner's
	return unix.Fchmod(fd, st.Mode&0o7777)
}

// ReserveAppend reserves room for n more bytes at the end of path (created
// when missing), so that a line of up to n bytes appended later does not
// meet a full disk: fallocate without changing the size. It fails when the
// file's filesystem has no room; a filesystem that cannot preallocate
// (EOPNOTSUPP) reserves nothing and is no failure.
func ReserveAppend(path string, n int64) error {
	fd, st, err := openAppend(path, unix.O_CREAT)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	lockAppend(fd)
	if err := fstatRetry(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	for {
		err = unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, st.Size, n)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "reserve", Path: path, Err: err}
	}
	return nil
}
