package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// An idmapped workspace needs a user namespace with the mapping, and a
// user namespace needs a process to be made in: a holder started and
// killed for it (mappedUserns), the slowest step of a uid-mode start. The
// namespace it made is kept for the next start with the same mapping:
// bound onto a file of the caller's runtime directory, as `ip netns`
// keeps network namespaces, it lives with no process until that mount
// goes (umount, or a reboot of a tmpfs /run). It holds nothing but the
// mapping: nobody enters it (setns into a user namespace takes
// CAP_SYS_ADMIN over it, which only its owner, the root caller, has), and
// it is only ever given to mount_setattr as an idmap.

// usernsPinDir is the directory of the kept namespaces in a runtime
// directory.
const usernsPinDir = "userns"

// pinnedUserns returns the user namespace for m kept under runtime, or
// makes one (mappedUserns) and keeps it there. Keeping is best effort:
// the namespace is returned either way.
func pinnedUserns(runtime string, m IDMapping) (*os.File, error) {
	if runtime == "" {
		return mappedUserns(m)
	}
	dir := filepath.Join(runtime, usernsPinDir)
	name := "map-" + strconv.FormatUint(uint64(m.DiskUID), 10) + "-" + strconv.FormatUint(uint64(m.DiskGID), 10) +
		"-" + strconv.FormatUint(uint64(m.UID), 10) + "-" + strconv.FormatUint(uint64(m.GID), 10)
	if ns, err := openPinnedUserns(filepath.Join(dir, name)); err == nil {
		return ns, nil
	}
	ns, err := mappedUserns(m)
	if err != nil {
		return nil, err
	}
	pinUserns(ns, dir, name)
	return ns, nil
}

// openPinnedUserns opens path, refusing anything but a user namespace
// owned by this process's uid (a symlink, a plain file left where the
// mount went away, another kind of namespace).
func openPinnedUserns(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: not a namespace", path)
	}
	kind, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil || kind != unix.CLONE_NEWUSER {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: not a user namespace", path)
	}
	owner, err := unix.IoctlGetUint32(fd, unix.NS_GET_OWNER_UID)
	if err != nil || int(owner) != os.Geteuid() {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: not this user's namespace", path)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// pinUserns binds ns onto dir/name, made for it (O_EXCL): a start racing
// this one to keep the same mapping keeps its own namespace unkept, and a
// file left by a mount that went away is replaced.
func pinUserns(ns *os.File, dir, name string) {
	if err := fsops.MkdirNoFollow(dir, 0o700); err != nil {
		return
	}
	dfd, err := fsops.OpenNoSymlinks(dir)
	if err != nil {
		return
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0 {
		unix.Unlinkat(dfd, name, 0) // the mount point of a namespace no longer kept
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o400)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if err := unix.Mount(fsops.FDPath(int(ns.Fd())), fsops.FDPath(fd), "", unix.MS_BIND, ""); err != nil {
		unix.Unlinkat(dfd, name, 0)
	}
}
