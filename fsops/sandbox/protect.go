package sandbox

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// protectInPlace makes the file or directory at target, inside a mount the
// plan already made (the workspace), read-only in place: a clone of the
// mount at that spot, made read-only before it is attached, goes on top
// of it. No host path is bound, so the workspace's own options (nosuid,
// nodev, noexec, and in uid mode its idmapping, which git's ownership
// check needs) carry over. target is reached without following any
// symlink: the host checked it when the run started, and a symlink there
// now means the workspace changed under the start; following it could
// protect (and so reveal nothing, but disturb) some other place.
//
// Once attached, the agent cannot remove or replace the path (a mount
// point is EBUSY to unlink and rename), and every write under it is
// EROFS.
func protectInPlace(target string) error {
	fd, err := fsops.OpenNoSymlinks(target)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return errors.New("a symlink now stands on the way (it was not one when the run started; never followed)")
		}
		if errors.Is(err, unix.ENOENT) {
			return errors.New("gone since the run started")
		}
		return err
	}
	defer unix.Close(fd)
	attrs := uint64(unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err == nil {
		defer unix.Close(tree)
		setErr := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: attrs})
		if setErr != nil && setErr != unix.ENOSYS {
			return fmt.Errorf("making the clone read-only: %w", setErr)
		}
		if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
			return fmt.Errorf("attaching the read-only clone: %w", err)
		}
		if setErr == nil {
			return checkReadOnlyAt(target)
		}
		// Linux 5.2 to 5.11: open_tree without mount_setattr; the
		// attached clone is remounted read-only below.
	} else if err == unix.ENOSYS {
		// Before Linux 5.2: a classic bind of the spot onto itself.
		if err := unix.Mount(fsops.FDPath(fd), fsops.FDPath(fd), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding in place: %w", err)
		}
	} else {
		return fmt.Errorf("cloning the mount in place: %w", err)
	}
	top, err := fsops.OpenNoSymlinks(target)
	if err != nil {
		return err
	}
	defer unix.Close(top)
	if err := remount(fsops.FDPath(top), unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("remounting read-only: %w", err)
	}
	return checkReadOnlyAt(target)
}

// checkReadOnlyAt reopens target the way the agent will reach it and
// checks that what it finds is read-only: the protection is verified, not
// assumed.
func checkReadOnlyAt(target string) error {
	fd, err := fsops.OpenNoSymlinks(target)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return err
	}
	if int64(sfs.Flags)&stRdonly == 0 {
		return errors.New("still writable after the read-only mount")
	}
	return nil
}
