package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/policy/sandboxplan"
)

// The plan's ops (sandboxplan.Op: directories, files, symlinks, tmpfs, proc,
// devpts, binds, masks, read-only remounts, the pivot), applied one at a
// time by the sandbox's init (applyMounts): each below base, the new root
// it has entered ("." before the pivot, "/" after), and never through a
// symlink (safeJoin).

// Statfs flags (statvfs ST_*), which x/sys does not name.
const (
	stRdonly     = 0x1
	stNosuid     = 0x2
	stNodev      = 0x4
	stNoexec     = 0x8
	stNoatime    = 0x400
	stNodiratime = 0x800
	stRelatime   = 0x1000
)

// ApplyOp applies one op of the plan below base.
func ApplyOp(base string, op sandboxplan.Op) error {
	switch op.Kind {
	case sandboxplan.OpPivotRoot:
		return pivotRoot(base)
	case sandboxplan.OpLoopback:
		return loopbackUp()
	case sandboxplan.OpBind:
		// Its mount point is made and attached to through a descriptor
		// of its checked parent (MountPoint): no separate check.
		if err := cleanComponents(op.Target); err != nil {
			return err
		}
		return bindMount(base, op, filepath.Join(base, op.Target))
	}
	target, err := safeJoin(base, op.Target)
	if err != nil {
		return err
	}
	mode := os.FileMode(op.Mode)
	switch op.Kind {
	case sandboxplan.OpDir:
		return MkdirAll(base, op.Target, orMode(mode, 0o755))
	case sandboxplan.OpFile:
		if err := MkdirAll(base, filepath.Dir(op.Target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, op.Data, orMode(mode, 0o644))
	case sandboxplan.OpSymlink:
		if err := MkdirAll(base, filepath.Dir(op.Target), 0o755); err != nil {
			return err
		}
		return os.Symlink(op.Source, target)
	case sandboxplan.OpTmpfs:
		if err := MkdirAll(base, op.Target, 0o755); err != nil {
			return err
		}
		return mountTmpfs(target, op, orMode(mode, 0o755))
	case sandboxplan.OpProc:
		if err := MkdirAll(base, op.Target, 0o555); err != nil {
			return err
		}
		return unix.Mount("proc", target, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	case sandboxplan.OpDevpts:
		if err := MkdirAll(base, op.Target, 0o755); err != nil {
			return err
		}
		return unix.Mount("devpts", target, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	case sandboxplan.OpMask:
		return maskPath(target)
	case sandboxplan.OpReadOnly:
		return remount(target, unix.MS_RDONLY)
	case sandboxplan.OpProtectPath:
		return protectInPlace(target)
	case sandboxplan.OpProtect:
		// A part of a filesystem the plan mounted (/proc/sys): bound onto
		// itself, then that bind made read-only.
		if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err := unix.Mount(target, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		return remount(target, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC)
	}
	return fmt.Errorf("unknown op %q", op.Kind)
}

// mountTmpfs mounts a fresh tmpfs of op's size at target, nosuid,
// nodev (and noexec when op says so), its top of the given mode, and
// fills it with op's entries.
func mountTmpfs(target string, op sandboxplan.Op, mode os.FileMode) error {
	opts := "mode=" + strconv.FormatUint(uint64(mode), 8)
	if op.Size != "" {
		opts += ",size=" + op.Size
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if op.NoExec {
		flags |= unix.MS_NOEXEC
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", flags, opts); err != nil {
		return err
	}
	return fillTmpfs(target, op.Fill)
}

// maskPath hides what is at target: a directory under an empty read-only
// tmpfs, a file under /dev/null bound read-only. Nothing there, or a
// symlink, needs no mask.
func maskPath(target string) error {
	st, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.IsDir() {
		if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=4k"); err != nil {
			return err
		}
		return remount(target, unix.MS_RDONLY)
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil // a symlink into a masked or read-only place; nothing to read through it
	}
	if err := unix.Mount("/dev/null", target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return remount(target, unix.MS_RDONLY)
}

// orMode is m, or def when the plan gave no mode.
func orMode(m, def os.FileMode) os.FileMode {
	if m == 0 {
		return def
	}
	return m
}

// bindMount binds op.Source at target. The source is opened without
// following a symlink in any component and the bind is made from that
// descriptor, so the object checked is the object mounted: an agent that
// turned a source (its skills, a shared directory, a --mount path) into a
// symlink between runs gets a refusal, never the symlink's target.
func bindMount(base string, op sandboxplan.Op, target string) error {
	if op.IDMap && idmappedWorkspace != nil {
		return attachIDMapped(base, op)
	}
	srcFD, err := fsops.OpenNoSymlinks(op.Source)
	if err != nil {
		if op.Optional && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("source %s: %w", op.Source, fsops.ExplainNoSymlinks(err))
	}
	defer unix.Close(srcFD)
	var st unix.Stat_t
	if err := unix.Fstat(srcFD, &st); err != nil {
		return fmt.Errorf("source %s: %w", op.Source, err)
	}
	pfd, name, err := MountPoint(base, op.Target, st.Mode&unix.S_IFMT == unix.S_IFDIR)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if done, err := attachBind(srcFD, op, pfd, name); done {
		return err
	}
	flags := uintptr(unix.MS_BIND)
	if op.Recursive {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(fsops.FDPath(srcFD), target, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s: %w", op.Source, err)
	}
	return restrictBind(op, target)
}

// attachBind binds srcFD at name in dirFD with the new mount API: a detached copy
// of the source (open_tree), given the op's flags (mount_setattr, on every
// mount of an rbind at once: AT_RECURSIVE), then attached (move_mount). The
// old way remounted each mount, the statfs before each remount keeping
// flags the kernel locks, and an rbind reread the whole mount table to find
// its submounts: with about 50 binds per sandbox that was the largest part
// of building it. mount_setattr only adds flags, so locked ones stay by
// themselves. done is false when the kernel has no such calls (before
// 5.12): then mount(2) does it.
func attachBind(srcFD int, op sandboxplan.Op, dirFD int, name string) (done bool, err error) {
	how := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_EMPTY_PATH)
	at := uint(unix.AT_EMPTY_PATH)
	if op.Recursive {
		how |= unix.AT_RECURSIVE
		at |= unix.AT_RECURSIVE
	}
	tree, err := unix.OpenTree(srcFD, "", how)
	if err == unix.ENOSYS {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("bind %s: %w", op.Source, err)
	}
	defer unix.Close(tree)
	if attrs := MountAttrs(op); attrs != 0 {
		err := unix.MountSetattr(tree, "", at, &unix.MountAttr{Attr_set: attrs})
		if err == unix.ENOSYS {
			return false, nil
		}
		if err != nil {
			return true, fmt.Errorf("bind %s: setting its flags: %w", op.Source, err)
		}
	}
	// Attached at name in the checked parent; a name that became a
	// symlink meanwhile is not followed (no MOVE_MOUNT_T_SYMLINKS).
	if err := unix.MoveMount(tree, "", dirFD, name, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return true, fmt.Errorf("bind %s: %w", op.Source, err)
	}
	return true, nil
}

// restrictBind adds the op's ro, nosuid, nodev and noexec to the bind at
// target and, for an rbind, to every submount under it.
func restrictBind(op sandboxplan.Op, target string) error {
	want := msFlags(op)
	if want == 0 {
		return nil
	}
	if err := remount(target, want); err != nil {
		return err
	}
	if op.Recursive {
		// A read-only (or nosuid...) rbind must not leave its submounts
		// writable: remount each of them the same way.
		subs, err := submounts(target)
		if err != nil {
			return err
		}
		for _, s := range subs {
			if err := remount(s, want); err != nil {
				return fmt.Errorf("remounting submount %s: %w", s, err)
			}
		}
	}
	return nil
}

// remount adds flags to the bind mount at target, keeping the flags the
// mount already has: inside a user namespace the kernel refuses to clear
// flags that were locked on the original mount (nosuid, nodev, ro...).
func remount(target string, flags uintptr) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		return err
	}
	for _, m := range []struct {
		st int64
		ms uintptr
	}{{stRdonly, unix.MS_RDONLY}, {stNosuid, unix.MS_NOSUID}, {stNodev, unix.MS_NODEV}, {stNoexec, unix.MS_NOEXEC},
		{stNoatime, unix.MS_NOATIME}, {stNodiratime, unix.MS_NODIRATIME}, {stRelatime, unix.MS_RELATIME}} {
		if int64(sfs.Flags)&m.st != 0 {
			flags |= m.ms
		}
	}
	return unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|flags, "")
}

// submounts lists the mount points strictly below dir.
func submounts(dir string) ([]string, error) {
	table, err := fsops.MountTable()
	var out []string
	for _, m := range table {
		if strings.HasPrefix(m.Target, dir+"/") {
			out = append(out, m.Target)
		}
	}
	return out, err
}

// safeJoin joins rel (absolute inside the sandbox) under base and refuses a
// path that goes through a symlink: mount targets are resolved by the
// kernel, and a symlink in a caller's directory must not redirect a mount.
// The last component may be anything (the op decides); every directory on
// the way is checked in one lookup that follows no symlink.
func safeJoin(base, rel string) (string, error) {
	if err := cleanComponents(rel); err != nil {
		return "", err
	}
	target := filepath.Join(base, rel)
	parent := filepath.Dir(filepath.Clean("/" + rel))
	if parent == "/" {
		return target, nil
	}
	switch err := dirNoSymlinks(filepath.Join(base, parent)); err {
	case nil, unix.ENOENT:
		// Missing directories have no symlink in them; MkdirAll makes
		// them, refusing symlinks the same way.
		return target, nil
	case unix.ELOOP:
		return "", fmt.Errorf("%s: a symlink on the way to a mount target", rel)
	default:
		return "", &os.PathError{Op: "lookup", Path: parent, Err: err}
	}
}

// cleanComponents refuses a target with a "." or ".." component.
func cleanComponents(rel string) error {
	for _, c := range strings.Split(strings.Trim(rel, "/"), "/") {
		if c == "." || c == ".." {
			return fmt.Errorf("%q: %q component", rel, c)
		}
	}
	return nil
}

// MountPoint makes, or finds, the mount point for a bind of a directory
// (dir) or a file at rel under base: its parent made or found without
// following any symlink, and the point made in it, or found there,
// through a descriptor of that parent: a directory, or an empty regular
// file (the /mnt skeleton is read-only and has its own). Anything else
// there is refused, and nothing existing is opened. It returns the
// parent's descriptor and the point's name, for the attach to be made
// relative to them; the caller closes the descriptor.
func MountPoint(base, rel string, dir bool) (int, string, error) {
	rel = filepath.Clean("/" + rel)
	parent, name := filepath.Dir(rel), filepath.Base(rel)
	if rel == "/" {
		return -1, "", fmt.Errorf("%s: not a mount point of its own", rel)
	}
	pfd, err := fsops.OpenDirNoSymlinks(filepath.Join(base, parent))
	if err == unix.ENOENT {
		if err = MkdirAll(base, parent, 0o755); err != nil {
			return -1, "", err
		}
		pfd, err = fsops.OpenDirNoSymlinks(filepath.Join(base, parent))
	}
	switch err {
	case nil:
	case unix.ELOOP:
		return -1, "", fmt.Errorf("%s: a symlink on the way to a mount target", rel)
	default:
		return -1, "", &os.PathError{Op: "lookup", Path: parent, Err: err}
	}
	want, what := uint32(unix.S_IFREG), "a regular file"
	if dir {
		want, what = unix.S_IFDIR, "a directory"
		err = unix.Mkdirat(pfd, name, 0o755)
	} else {
		// mknod makes the empty file without opening it (an open with
		// O_CREAT|O_EXCL, then a close, opens a file to drop it); like O_EXCL
		// it fails on any existing name, a symlink included.
		err = unix.Mknodat(pfd, name, unix.S_IFREG|0o644, 0)
	}
	if err == unix.EEXIST || err == unix.EROFS {
		var st unix.Stat_t
		if serr := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
			if st.Mode&unix.S_IFMT == want {
				return pfd, name, nil
			}
			unix.Close(pfd)
			return -1, "", fmt.Errorf("%s: exists and is not %s", rel, what)
		}
	}
	if err != nil {
		unix.Close(pfd)
		return -1, "", &os.PathError{Op: "create", Path: rel, Err: err}
	}
	return pfd, name, nil
}

// MkdirAll creates rel under base, refusing symlinks on the way: one
// lookup that follows none when rel exists (most of a plan's targets);
// else its parent is made or found the same way, and rel is made in it
// through a descriptor of that parent, so nothing is looked up twice.
func MkdirAll(base, rel string, mode os.FileMode) error {
	rel = filepath.Clean("/" + rel)
	if rel == "/" {
		return nil
	}
	switch err := dirNoSymlinks(filepath.Join(base, rel)); err {
	case nil:
		return nil
	case unix.ENOENT:
	case unix.ELOOP, unix.ENOTDIR:
		return fmt.Errorf("%s: exists and is not a directory", rel)
	default:
		return err
	}
	parent := filepath.Dir(rel)
	if err := MkdirAll(base, parent, mode); err != nil {
		return err
	}
	pfd, err := fsops.OpenDirNoSymlinks(filepath.Join(base, parent))
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	defer unix.Close(pfd)
	name := filepath.Base(rel)
	err = unix.Mkdirat(pfd, name, uint32(mode.Perm()))
	if err == unix.EEXIST {
		// Made by a racer meanwhile: it must be a directory itself.
		var st unix.Stat_t
		if unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil
		}
		return fmt.Errorf("%s: exists and is not a directory", rel)
	}
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	return nil
}

// dirNoSymlinks reports whether path is a directory reached without
// following any symlink, in one lookup: nil, or ENOENT (a component is
// missing), ELOOP (a symlink on the way, or path itself), ENOTDIR (a
// component is not a directory).
func dirNoSymlinks(path string) error {
	fd, err := fsops.OpenDirNoSymlinks(path)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// loopbackUp brings lo up in a new network namespace, so local servers work
// without any route to the outside.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
