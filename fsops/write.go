package fsops

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// TempName returns the name of a sibling temporary file for target:
// ".<base>.tmp-<pid>-<random>". The leading dot keeps temporaries out of
// listings and out of the queue's job namespace.
func TempName(target string) string {
	var r [6]byte
	_ = RandomBytes(r[:])
	return filepath.Join(filepath.Dir(target),
		"."+filepath.Base(target)+".tmp-"+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(r[:]))
}

// WriteAtomic replaces the file at path with data, durably: a sibling
// temporary file is created with O_EXCL, written, fsynced and renamed over
// path, then the directory is fsynced. Without the file fsync a crash after
// the rename may leave an empty file; without the directory fsync the rename
// itself may be lost. The temporary file is removed on every failure path,
// so a failed write leaves path exactly as it was.
//
// A symlink or non-regular file at path is refused, never written through
// or replaced.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	if err := checkReplaceable(path); err != nil {
		return err
	}
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// WriteVolatile replaces the file at path atomically but without fsync:
// readers see the old or the new contents, never a mix, but a crash may
// lose the change. It is for runtime state that describes live processes
// (an agent's status and pid, a session's state), which a crash makes
// stale anyway and which readers check against the processes themselves.
func WriteVolatile(path string, data []byte, perm os.FileMode) error {
	if err := checkReplaceable(path); err != nil {
		return err
	}
	tmp := TempName(path)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}

// WriteNew creates path with data, durably, and never replaces anything:
// the temporary file is hard-linked to path (link fails with EEXIST when
// path exists, even as a dangling symlink), then removed. On any failure
// nothing is left at path and the temporary is gone.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	if err := os.Remove(tmp); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// writeTemp writes data to a fresh sibling temporary of target and fsyncs it.
func writeTemp(target string, data []byte, perm os.FileMode) (string, error) {
	tmp := TempName(target)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm)
	if err != nil {
		// Name the file the caller asked for, not our temporary.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = &os.PathError{Op: "write", Path: target, Err: pe.Err}
		}
		return "", err
	}
	_, werr := f.Write(data)
	if werr == nil {
		// O_CREATE applies the umask; the mode we promise is perm.
		werr = f.Chmod(perm)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(tmp)
		return "", werr
	}
	return tmp, nil
}

func checkReplaceable(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case st.Mode()&os.ModeSymlink != 0:
		return &os.PathError{Op: "write", Path: path, Err: ErrSymlink}
	case !st.Mode().IsRegular():
		return &os.PathError{Op: "write", Path: path, Err: notRegular(st.Mode())}
	}
	return nil
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func SyncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

// RenameNoReplace renames oldpath to newpath unless newpath exists (even as
// a dangling symlink), with renameat2(RENAME_NOREPLACE), then fsyncs the
// directory of newpath.
func RenameNoReplace(oldpath, newpath string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return SyncDir(filepath.Dir(newpath))
}
