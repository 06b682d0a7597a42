package queue

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SharedDirMode is the mode of <root>/shared when CreateSpace has to make
// it (bootstrap normally has): everyone may look up spaces, whose own
// modes decide who may enter.
const SharedDirMode = 0o755

// SpaceDirs are the directories of a shared space, relative to
// shared/SPACE, in creation order.
var SpaceDirs = []string{
	"data", "tool", "agent", "queue",
	"queue/inbox", "queue/pending", "queue/lease", "queue/claimed", "queue/done", "queue/failed",
}

// CreateSpace creates shared/SPACE under root with data/, tool/, agent/ and
// queue/{inbox,pending,lease,claimed,done,failed} (mode DirMode) and an
// empty queue/log (LogMode), and shared/ itself (SharedDirMode) when
// missing. It is idempotent: what exists is kept as it is (mode and owner
// untouched) and what is missing is created, each new entry made durable
// by fsyncing its parent. Every component below root is opened with
// O_NOFOLLOW: an existing symlink anywhere is refused with ELOOP and
// nothing is created through it. It returns the space directory and the
// paths it created.
func CreateSpace(root, space string) (dir string, created []string, err error) {
	if err := ValidSpaceName(space); err != nil {
		return "", nil, fmt.Errorf("%w: space: %v", ErrInvalid, err)
	}
	rootfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, pathErr("open", root, err)
	}
	defer unix.Close(rootfd)
	sharedfd, made, err := ensureDir(rootfd, root, "shared", SharedDirMode)
	if err != nil {
		return "", nil, err
	}
	defer unix.Close(sharedfd)
	shared := filepath.Join(root, "shared")
	if made {
		created = append(created, shared)
	}
	dir = filepath.Join(shared, space)
	spacefd, made, err := ensureDir(sharedfd, shared, space, DirMode)
	if err != nil {
		return "", created, err
	}
	defer unix.Close(spacefd)
	if made {
		created = append(created, dir)
	}
	fds := map[string]int{".": spacefd}
	defer func() {
		for name, fd := range fds {
			if name != "." {
				unix.Close(fd)
			}
		}
	}()
	for _, rel := range SpaceDirs {
		parent, name := filepath.Split(rel)
		parent = filepath.Clean(parent)
		fd, made, err := ensureDir(fds[parent], filepath.Join(dir, parent), name, DirMode)
		if err != nil {
			return dir, created, err
		}
		fds[rel] = fd
		if made {
			created = append(created, filepath.Join(dir, rel))
		}
	}
	qfd := fds["queue"]
	logPath := filepath.Join(dir, "queue", LogName)
	fd, err := unix.Openat(qfd, LogName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, LogMode)
	switch {
	case err == nil:
		ferr := fixMode(fd, LogMode, logPath)
		if ferr == nil {
			ferr = fsyncFd(fd, logPath)
		}
		unix.Close(fd)
		if ferr == nil {
			ferr = fsyncFd(qfd, filepath.Join(dir, "queue"))
		}
		if ferr != nil {
			return dir, created, ferr
		}
		created = append(created, logPath)
	case err == unix.EEXIST:
		st, err := lstatAt(qfd, LogName)
		if err != nil {
			return dir, created, pathErr("stat", logPath, err)
		}
		if !isReg(&st) {
			return dir, created, pathErr("open", logPath, fmt.Errorf("is a %s, not a regular file", kindOf(&st)))
		}
	default:
		return dir, created, pathErr("create", logPath, err)
	}
	return dir, created, nil
}

// ensureDir opens directory name inside parentfd, creating it with mode
// (exactly, whatever the umask) when missing and fsyncing the parent. It
// never follows a symlink.
func ensureDir(parentfd int, parentPath, name string, mode uint32) (fd int, made bool, err error) {
	path := filepath.Join(parentPath, name)
	err = unix.Mkdirat(parentfd, name, mode&0o777)
	switch {
	case err == nil:
		made = true
	case err != unix.EEXIST:
		return -1, false, pathErr("mkdir", path, err)
	}
	fd, err = openDirAt(parentfd, name)
	if err != nil {
		return -1, false, pathErr("open", path, err)
	}
	if made {
		// mkdir(2) ignores the setgid bit and applies the umask; set the
		// documented mode on the directory we just created.
		if err := unix.Fchmod(fd, mode); err != nil {
			unix.Close(fd)
			return -1, false, pathErr("chmod", path, err)
		}
		if err := fsyncFd(parentfd, parentPath); err != nil {
			unix.Close(fd)
			return -1, false, err
		}
	}
	return fd, made, nil
}
