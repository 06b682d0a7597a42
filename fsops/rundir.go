package fsops

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A run's directory (RUNTIME/TREE/run/RUN, the files shown at /mnt/proc) is
// removed by its run host when the run ends. A host killed with SIGKILL
// cannot remove it, so each directory is held: its host keeps an
// exclusive flock on it for its whole life, which the kernel drops when
// the host dies however it dies. A later start sweeps the directories
// whose lock it can take (SweepUnheld): nobody is serving them any more.

// heldPrefix names a held directory while it is made: it is locked
// before it takes its name, so a sweep never sees it unlocked.
const heldPrefix = ".new-"

// heldQuiet is how long a directory left under heldPrefix (its maker
// died between its mkdir and its rename, microseconds apart) must have
// been unchanged before a sweep removes it: a directory being made right
// now is never that old.
var heldQuiet = time.Minute

// MakeHeldDir makes parent/name with mode, held by this process until the
// returned file is closed or the process ends. It is made under a
// temporary name, locked, then renamed into place without replacing
// anything.
func MakeHeldDir(parent, name string, mode uint32) (*os.File, error) {
	tmp := heldPrefix + name
	pfd, err := OpenNoSymlinks(parent)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: parent, Err: ExplainNoSymlinks(err)}
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, tmp, mode); err != nil {
		return nil, &os.PathError{Op: "mkdir", Path: filepath.Join(parent, tmp), Err: err}
	}
	fd, err := unix.Openat(pfd, tmp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		if err = unix.Fchmod(fd, mode); err == nil { // whatever the umask
			err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		}
		if err == nil {
			err = renameDirNoReplace(pfd, tmp, name)
		}
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		unix.Unlinkat(pfd, tmp, unix.AT_REMOVEDIR)
		return nil, &os.PathError{Op: "make", Path: filepath.Join(parent, name), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(parent, name)), nil
}

// renameDirNoReplace renames directory tmp to name in dirfd, never over
// anything. Where the filesystem has no RENAME_NOREPLACE (NFS), name is
// looked up first: a directory cannot be linked, and the names made here
// are fresh run ids, so only a second maker of the same random name could
// slip between the two calls.
func renameDirNoReplace(dirfd int, tmp, name string) error {
	err := RenameNoReplaceAt(dirfd, tmp, dirfd, name)
	if err != ErrNoReplaceUnsupported {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != unix.ENOENT {
		if err == nil {
			return unix.EEXIST
		}
		return err
	}
	return unix.Renameat(dirfd, tmp, dirfd, name)
}

// SweepUnheld removes the directories in parent whose names isHeldName
// accepts and whose lock it can take (their maker has died), and the
// leftovers of a MakeHeldDir interrupted before its rename. It returns
// the names it removed. Symlinks and other files are left alone; a
// directory is removed while its lock is held, through descriptors that
// follow no symlink (os.RemoveAll). Errors are not reported: a sweep is
// housekeeping, and whatever it leaves the next one retries.
func SweepUnheld(parent string, isHeldName func(string) bool) []string {
	names, err := DirNames(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, name := range names {
		made := strings.TrimPrefix(name, heldPrefix)
		if !isHeldName(made) {
			continue
		}
		if sweepOne(parent, name, made != name) {
			removed = append(removed, made)
		}
	}
	return removed
}

// sweepOne removes parent/name if nobody holds it (and, for a leftover
// under heldPrefix, if it has been unchanged for heldQuiet).
func sweepOne(parent, name string, leftover bool) bool {
	path := filepath.Join(parent, name)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false // its host is alive (EWOULDBLOCK)
	}
	if leftover {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || time.Since(time.Unix(st.Ctim.Unix())) < heldQuiet {
			return false
		}
	}
	return os.RemoveAll(path) == nil
}
