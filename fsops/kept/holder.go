package kept

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/fsops/sandbox"
)

// Where the mount namespaces ctx keeps between runs live (template.go):
// not in the host's mount table, where every namespace made on the host
// would copy them and every start's own copy of the table would grow with
// them, but in one mount namespace of their own, the holder: a small tmpfs
// root, pivoted into so that it holds nothing of the host's, kept as
// RUNTIME/kept/holder (RUNTIME the user's runtime directory; bound there as
// `ip netns` keeps namespaces, on RUNTIME/kept made a private mount of its
// own, since a mount namespace cannot be bound beneath a shared mount).
// Those two mounts are the host's only ones, made once. In the holder,
// /TREE (a tree's RuntimeKey) names the tree's root in a file (root) beside
// what is kept for its agents. A tree that is gone (its root removed, or
// another tree made at its path) leaves what it kept until the next
// namespace is kept, which releases it (sweepKept).

const (
	keptDirName  = "kept"
	keptHolder   = "holder"
	keptRootFile = "root"
)

// KeepHolder makes the holder under runtime, the user's runtime directory,
// unless it is kept already.
func KeepHolder(runtime string) error {
	h, err := openHolder(runtime)
	if err == nil {
		h.Close()
	}
	return err
}

// openHolder opens the holder kept under runtime, or makes and keeps one.
func openHolder(runtime string) (*os.File, error) {
	dir := filepath.Join(runtime, keptDirName)
	pin := filepath.Join(dir, keptHolder)
	if h, err := openKeptMountNS(pin); err == nil {
		return h, nil
	}
	if !sandbox.RootIsMountPoint() {
		return nil, errors.New("the root is no mount point (a chroot): nothing kept")
	}
	if err := fsops.MkdirNoFollow(dir, 0o700); err != nil {
		return nil, err
	}
	if err := privateMount(dir); err != nil {
		return nil, err
	}
	var h *os.File
	err := onThreadIn(func() error { return unix.Unshare(unix.CLONE_NEWNS) }, func() error {
		fd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		h = os.NewFile(uintptr(fd), "holder")
		return emptyRoot(dir)
	})
	if err != nil {
		if h != nil {
			h.Close()
		}
		return nil, err
	}
	defer h.Close()
	if err := pinHere(h, dir, keptHolder); err != nil {
		return nil, err
	}
	return openKeptMountNS(pin)
}

// emptyRoot makes the calling thread's (new, unshared) mount namespace
// one of a small empty tmpfs: mounted on dir there, pivoted into, the rest
// detached.
func emptyRoot(dir string) error {
	if !sandbox.RootIsMountPoint() {
		return errors.New("the root is no mount point (a chroot): nothing kept")
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=1m"); err != nil {
		return err
	}
	if err := unix.Chdir(dir); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return err
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return err
	}
	return unix.Chdir("/")
}

// openKeptMountNS opens path, refusing anything but a mount namespace
// owned by this process's user namespace.
func openKeptMountNS(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil || fs.Type != unix.NSFS_MAGIC {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: not a namespace", path)
	}
	if kind, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE); err != nil || kind != unix.CLONE_NEWNS || !ownedByUs(fd) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: not a mount namespace of this user's", path)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// privateMount makes dir a mount of its own (bound onto itself) with
// private propagation.
func privateMount(dir string) error {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return err
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 || st.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	return unix.Mount("", dir, "", unix.MS_PRIVATE, "")
}

// pinHere binds ns onto dir/name in the calling thread's view (the host's
// for the holder), made for it (O_EXCL); whatever was there is removed
// first.
func pinHere(ns *os.File, dir, name string) error {
	p := filepath.Join(dir, name)
	unix.Unmount(p, unix.MNT_DETACH)
	unix.Unlink(p)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o400)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Mount(fsops.FDPath(int(ns.Fd())), fsops.FDPath(fd), "", unix.MS_BIND, ""); err != nil {
		unix.Unlink(p)
		return err
	}
	return nil
}

// keepTree attaches tree (a detached mount tree) at the holder's
// /TREE/name, a directory made for it (the calling thread is in the
// holder). The tree, not its namespace, is kept: a mount namespace can
// be bound only into an older one, and namespaces' ages are not in the
// order they were made.
func keepTree(tree *os.File, treeKey, name string) error {
	p := "/" + treeKey + "/" + name
	unix.Unmount(p, unix.MNT_DETACH)
	unix.Rmdir(p)
	if err := unix.Mkdir(p, 0o700); err != nil {
		return err
	}
	if err := unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		unix.Rmdir(p)
		return err
	}
	return nil
}

// keptTrees lists the holder's trees and the roots they name (the calling
// thread is in it).
func keptTrees() map[string]string {
	out := map[string]string{}
	names, _ := fsops.DirNames("/")
	for _, n := range names {
		b, err := fsops.ReadControl("/" + n + "/" + keptRootFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			continue
		}
		out[n] = string(b)
	}
	return out
}

// deadTrees are the trees of kept (keptTrees) that are gone, looked up in
// the host's view: a root that names no tree with that key any more.
func deadTrees(kept map[string]string, keep string) []string {
	var dead []string
	for key, root := range kept {
		if key == keep {
			continue
		}
		if root != "" {
			if k, err := (fsops.Root{Dir: root}).RuntimeKey(); err == nil && k == key {
				continue
			}
		}
		dead = append(dead, key)
	}
	return dead
}

// releaseKept unmounts and removes what is kept in the holder's /TREE
// under names beginning with prefix, "" for all and the tree itself (the
// calling thread is in the holder).
func releaseKept(tree, prefix string) {
	names, _ := fsops.DirNames("/" + tree)
	for _, n := range names {
		if n == keptRootFile || !strings.HasPrefix(n, prefix) {
			continue
		}
		p := "/" + tree + "/" + n
		unix.Unmount(p, unix.MNT_DETACH)
		unix.Rmdir(p)
	}
	if prefix == "" {
		unix.Unlink("/" + tree + "/" + keptRootFile)
		unix.Rmdir("/" + tree)
	}
}

// threadNetwork opens the calling thread's network namespace, through a
// socket made there (SIOCGSKNS), not /proc: a lookup of a namespace link
// under /proc/PID left dentries that the kernel walked again when this
// process was reaped, and that walk cost more than what the lookup was for.
func threadNetwork() (int, error) {
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(s)
	return unix.IoctlRetInt(s, unix.SIOCGSKNS)
}

// sameFile reports whether descriptors a and b are the same file.
func sameFile(a, b int) bool {
	var sa, sb unix.Stat_t
	return unix.Fstat(a, &sa) == nil && unix.Fstat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// ownedByUs reports whether namespace ns is owned by the user namespace
// this process's own network namespace belongs to (the initial one, for
// the root caller that keeps namespaces).
func ownedByUs(ns int) bool {
	own, err := threadNetwork()
	if err != nil {
		return false
	}
	defer unix.Close(own)
	theirs, err := unix.IoctlRetInt(ns, unix.NS_GET_USERNS)
	if err != nil {
		return false
	}
	defer unix.Close(theirs)
	ours, err := unix.IoctlRetInt(own, unix.NS_GET_USERNS)
	if err != nil {
		return false
	}
	defer unix.Close(ours)
	return sameFile(theirs, ours)
}

// inHolder runs fn on a thread in the holder (onThreadIn).
func inHolder(holder *os.File, fn func() error) error {
	return onThreadIn(func() error { return unix.Setns(int(holder.Fd()), unix.CLONE_NEWNS) }, fn)
}

// keepInHolder keeps the detached mount tree t as the holder's /TREE/name
// for the tree at treeDir, releasing what the holder keeps under names
// beginning with replaces there, and everything it keeps for trees that
// are gone.
func keepInHolder(holder, t *os.File, tree, treeDir, name, replaces string) error {
	var kept map[string]string
	if err := inHolder(holder, func() error { kept = keptTrees(); return nil }); err != nil {
		return err
	}
	dead := deadTrees(kept, tree)
	return inHolder(holder, func() error {
		for _, d := range dead {
			releaseKept(d, "")
		}
		if err := unix.Mkdir("/"+tree, 0o700); err != nil && err != unix.EEXIST {
			return err
		}
		if kept[tree] != treeDir {
			if err := fsops.WriteVolatile("/"+tree+"/"+keptRootFile, []byte(treeDir), 0o600); err != nil {
				return err
			}
		}
		releaseKept(tree, replaces)
		return keepTree(t, tree, name)
	})
}
