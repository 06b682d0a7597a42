package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// A root caller in a chroot (a minimal image entered with chroot(2)) may
// still make a mount namespace, but its / is no mount root: making it
// private and pivot_root are refused (EINVAL). The sandbox then does what
// container runtimes do there: the whole namespace is made private from
// its real root (makeMountsPrivate), and the new root is moved over / and
// chrooted into (moveRoot) instead of pivoted into.

// makeMountsPrivate makes every mount of this new mount namespace private,
// first and before anything is mounted, so nothing mounted propagates back
// to the host's namespace. In a chroot, the init (still root in its own
// namespace, before it drops anything) steps out to the namespace's real
// root (chroot into dir, a directory below /, then ".." up until ".." is
// "."), makes the tree private there, and returns into the chroot through
// a descriptor of its root, with its working directory as it was.
func makeMountsPrivate(dir string) error {
	err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	if err != unix.EINVAL || RootIsMountPoint() {
		return err
	}
	back, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(back)
	cwd, err := unix.Open(".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(cwd)
	if err := unix.Fchdir(back); err != nil {
		return err
	}
	if err := unix.Chroot(dir); err != nil {
		return fmt.Errorf("leaving the chroot to reach the namespace's root: %w", err)
	}
	for i := 0; i < 4096; i++ {
		var here, up unix.Stat_t
		if err := unix.Stat(".", &here); err != nil {
			return err
		}
		if err := unix.Stat("..", &up); err != nil {
			return err
		}
		if here.Dev == up.Dev && here.Ino == up.Ino {
			break
		}
		if err := unix.Chdir(".."); err != nil {
			return err
		}
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	if e := unix.Fchdir(back); e != nil && err == nil {
		err = e
	}
	if e := unix.Chroot("."); e != nil && err == nil {
		err = e
	}
	if e := unix.Fchdir(cwd); e != nil && err == nil {
		err = e
	}
	return err
}

// pivotRoot makes newRoot the root and detaches the old one. pivot_root(".",
// ".") stacks the old root on top of the new one at "/"; unmounting "." then
// removes exactly the old root, with no put_old directory needed. Where
// pivot_root is refused because the caller's / is no mount root (a
// chroot: EINVAL), the new root is moved over / and chrooted into instead
// (moveRoot), the way container runtimes start in a chroot.
func pivotRoot(newRoot string) error {
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		if err == unix.EINVAL && !RootIsMountPoint() {
			return moveRoot()
		}
		return err
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return err
	}
	return unix.Chdir("/")
}

// moveRoot makes the current directory, the new root (a mount of its own:
// a tmpfs or the agent's root filesystem), the root without pivot_root:
// MS_MOVE puts it over /, chroot enters it. The old root stays beneath it
// in this mount namespace, out of reach by any path; leaving a chroot
// takes CAP_SYS_CHROOT (or the mount API and setns), which no agent
// process holds (an empty bounding set, no_new_privs, seccomp), so the
// walls are the same as after a pivot.
func moveRoot() error {
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving the new root over /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot into the new root: %w", err)
	}
	return unix.Chdir("/")
}
