package fsops

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// EditControl changes the control file at path to what edit makes of its
// contents, with the one atomic writer (WriteAt), under an exclusive edit
// lock held from the read to the rename (lockControl): two edits at once
// (two `ctx policy allow` into one policy) each see the other's result,
// so neither line is lost. The contents are read as ReadControl reads them
// (no symlink, a regular file, at most ControlLimit). A missing file is
// edited from empty when create is set (mode 0644), else the ENOENT is
// returned. When edit returns the contents unchanged nothing is written
// and changed is false; an error from edit writes nothing and is returned
// as it is.
func EditControl(path string, create bool, edit func(old []byte) ([]byte, error)) (changed bool, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	lock, err := lockControl(dfd, base)
	if err != nil {
		return false, &os.PathError{Op: "lock", Path: path, Err: err}
	}
	// Closing it drops the lock, after the rename and its fsync.
	if lock != dfd {
		defer unix.Close(lock)
	}
	mode := uint32(0o644)
	old, err := ReadControl(path)
	switch {
	case err == nil:
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return false, &os.PathError{Op: "stat", Path: path, Err: err}
		}
		mode = st.Mode & 0o7777
	case create && errors.Is(err, fs.ErrNotExist):
	default:
		return false, err
	}
	data, err := edit(old)
	if err != nil {
		return false, err
	}
	if old != nil && bytes.Equal(data, old) {
		return false, nil
	}
	if err := WriteAt(dfd, base, data, &WriteOpts{Mode: mode}); err != nil {
		return false, &os.PathError{Op: "write", Path: path, Err: errors.Unwrap(err)}
	}
	return true, nil
}

// lockControl takes the edit lock of the control base in the directory
// dfd and returns the descriptor holding it: an exclusive flock(2) of the
// file itself, taken again until it is held on the inode the name still
// leads to (the edit that held it before replaced the file); for a file
// that does not exist yet, of the directory (dfd), under which the file
// is found missing once more. A running agent's run host holds its
// control directory's flock for the run (its run lock): an edit of one of
// its existing controls (`ctx policy revoke` of its policy) does not wait
// for the run's end.
func lockControl(dfd int, base string) (int, error) {
	flock := func(fd int) error {
		for {
			if err := unix.Flock(fd, unix.LOCK_EX); err != unix.EINTR {
				return err
			}
		}
	}
	for {
		fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			if err := flock(dfd); err != nil {
				return -1, err
			}
			var st unix.Stat_t
			if unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == unix.ENOENT {
				return dfd, nil
			}
			unix.Flock(dfd, unix.LOCK_UN) // made meanwhile: lock the file
			continue
		}
		if err != nil {
			return -1, err
		}
		var held, now unix.Stat_t
		err = flock(fd)
		if err == nil {
			err = unix.Fstat(fd, &held)
		}
		if err != nil {
			unix.Close(fd)
			return -1, err
		}
		if unix.Fstatat(dfd, base, &now, unix.AT_SYMLINK_NOFOLLOW) == nil && now.Dev == held.Dev && now.Ino == held.Ino {
			return fd, nil
		}
		unix.Close(fd) // replaced (or removed) while we waited
	}
}
