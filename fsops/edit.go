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
// contents, with the one atomic writer (WriteAt), under an exclusive
// flock(2) of the file's directory held from the read to the rename: two
// edits at once (two `ctx policy allow` into one policy) each see the
// other's result, so neither line is lost. A file, not its directory,
// cannot carry the lock: every write replaces the file's inode. The
// contents are read as ReadControl reads them (no symlink, a regular file,
// at most ControlLimit). A missing file is edited from empty when create
// is set (mode 0644), else the ENOENT is returned. When edit returns the
// contents unchanged nothing is written and changed is false; an error
// from edit writes nothing and is returned as it is.
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
	for {
		err = unix.Flock(dfd, unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return false, &os.PathError{Op: "lock", Path: dir, Err: err}
	}
	// Closing dfd drops the lock, after the rename and its fsync.
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
