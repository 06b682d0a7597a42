package fsops

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The end of a run's hand on protected paths (DESIGN §16 rule 11): what
// the run created or changed is moved aside, never deleted, and the
// original put back. The run is over, but what it left in the workspace
// stays: every step goes through a directory opened without following a
// symlink, so a symlink the agent left never leads the host's renames or
// writes (as root, possibly) outside the workspace.

// Original is a protected path as the start of a run found it: a regular
// file's content, or a symlink's target, with its mode and owner.
type Original struct {
	Mode     uint32 // st_mode: type and permission bits
	UID, GID uint32
	Data     []byte // a regular file's content
	Link     string // a symlink's target
}

// QuarantineAside renames ws/rel to the same name with suffix appended
// (a further ".N" when that is taken; nothing is ever replaced) and
// returns the new path relative to ws.
func QuarantineAside(ws, rel, suffix string) (string, error) {
	dir, name := filepath.Split(filepath.Join(ws, rel))
	fd, err := OpenDirNoSymlinks(filepath.Clean(dir))
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	for i := 0; i < 100; i++ {
		to := name + suffix
		if i > 0 {
			to += "." + strconv.Itoa(i)
		}
		err = writableDir(fd, func() error { return renameNoReplace(fd, name, to) })
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return "", err
		}
		return filepath.Join(filepath.Dir(rel), to), nil
	}
	return "", unix.EEXIST
}

// renameNoReplace renames within directory fd, refusing to replace an
// existing entry; a filesystem without RENAME_NOREPLACE is asked first
// (the agent is gone: nothing races the check).
func renameNoReplace(fd int, from, to string) error {
	err := unix.Renameat2(fd, from, fd, to, unix.RENAME_NOREPLACE)
	if err != unix.EINVAL && err != unix.ENOSYS {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(fd, to, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return unix.EEXIST
	}
	return unix.Renameat(fd, from, fd, to)
}

// RestoreOriginal puts o back at ws/rel, which must be free: EEXIST when
// something stands there. Missing directories on the way are made (owned
// like o, mode 0755), never through a symlink.
func RestoreOriginal(ws, rel string, o Original) error {
	fd, err := openParentMaking(ws, filepath.Dir(rel), o)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return writableDir(fd, func() error { return restoreAt(fd, filepath.Base(rel), o) })
}

// writableDir runs do, which makes or renames an entry in the directory
// fd; when that is refused because the directory has lost its owner's
// write permission (the agent, running as the caller's uid, can chmod
// its directories), it gives the permission back for the step and takes
// it away again.
func writableDir(fd int, do func() error) error {
	err := do()
	if err != unix.EACCES {
		return err
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Uid != uint32(os.Geteuid()) || st.Mode&0o300 == 0o300 {
		return err
	}
	if unix.Chmod(FDPath(fd), st.Mode&0o7777|0o300) != nil {
		return err
	}
	defer unix.Chmod(FDPath(fd), st.Mode&0o7777)
	return do()
}

// restoreAt makes o as name in the directory fd.
func restoreAt(fd int, name string, o Original) error {
	if o.Mode&unix.S_IFMT == unix.S_IFLNK {
		if err := unix.Symlinkat(o.Link, fd, name); err != nil {
			return err
		}
		chownAt(fd, name, o, unix.AT_SYMLINK_NOFOLLOW)
		return nil
	}
	if o.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("not a regular file or a symlink")
	}
	f, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	file := os.NewFile(uintptr(f), name)
	defer file.Close()
	if _, err := file.Write(o.Data); err != nil {
		return err
	}
	if os.Geteuid() == 0 || o.UID == uint32(os.Geteuid()) {
		unix.Fchown(f, int(o.UID), int(o.GID))
	}
	return unix.Fchmod(f, o.Mode&0o7777)
}

// openParentMaking opens ws/dir (O_PATH) without following a symlink,
// making the directories that are missing.
func openParentMaking(ws, dir string, o Original) (int, error) {
	fd, err := OpenDirNoSymlinks(ws)
	if err != nil {
		return -1, err
	}
	if dir == "." {
		return fd, nil
	}
	for _, c := range strings.Split(dir, "/") {
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || err == unix.EEXIST {
				chownAt(fd, c, o, unix.AT_SYMLINK_NOFOLLOW)
				next, err = unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// chownAt gives name in fd o's owner where this process may.
func chownAt(fd int, name string, o Original, flags int) {
	if os.Geteuid() == 0 || o.UID == uint32(os.Geteuid()) {
		unix.Fchownat(fd, name, int(o.UID), int(o.GID), flags)
	}
}

// GiveOwnerSearch gives the directory at path back its owner's read and
// search permission when this process owns it and it lacks them (the
// agent, running as the caller's uid, can chmod a directory so that the
// end of its run cannot look into it), through a descriptor opened
// without following a symlink. It reports whether it changed the mode.
func GiveOwnerSearch(path string) bool {
	fd, err := OpenNoSymlinks(path)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) || st.Mode&0o500 == 0o500 {
		return false
	}
	return unix.Chmod(FDPath(fd), st.Mode&0o7777|0o500) == nil
}
