package sandbox

import (
	"fmt"
	"path"

	"ctx/policy/sandboxplan"

	"golang.org/x/sys/unix"
)

// fillTmpfs writes a tmpfs op's Fill into the tmpfs just mounted at dir:
// directories 0755, files with their mode (0444 when none), symlinks.
// Each entry is created relative to dir's descriptor, exclusively, and only
// inside a directory an earlier entry made: none goes through a symlink or
// replaces anything. One op this way replaced two per tool at /mnt, each
// of which checked every directory on its way from the host's /.
func fillTmpfs(dir string, entries []sandboxplan.FillEntry) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	dirs := map[string]bool{".": true}
	for _, e := range entries {
		if err := fillEntry(fd, e, dirs); err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
	}
	return nil
}

func fillEntry(dirfd int, e sandboxplan.FillEntry, dirs map[string]bool) error {
	if !sandboxplan.FillPathClean(e.Path) {
		return fmt.Errorf("not a clean relative path")
	}
	if !dirs[path.Dir(e.Path)] {
		return fmt.Errorf("its parent is not a directory of the fill")
	}
	switch e.Kind {
	case sandboxplan.FillDir:
		if err := unix.Mkdirat(dirfd, e.Path, 0o755); err != nil {
			return err
		}
		dirs[e.Path] = true
		// The umask must not take the agent's access away.
		return unix.Fchmodat(dirfd, e.Path, 0o755, 0)
	case sandboxplan.FillFile:
		mode := uint32(0o444)
		if e.Mode != 0 {
			mode = e.Mode & 0o7777
		}
		f, err := unix.Openat(dirfd, e.Path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err != nil {
			return err
		}
		defer unix.Close(f)
		if err := unix.Fchmod(f, mode); err != nil {
			return err
		}
		for data := e.Data; len(data) > 0; {
			n, err := unix.Write(f, data)
			if err != nil {
				return err
			}
			data = data[n:]
		}
		return nil
	case sandboxplan.FillLink:
		return unix.Symlinkat(e.Link, dirfd, e.Path)
	}
	return fmt.Errorf("unknown kind %q", e.Kind)
}
