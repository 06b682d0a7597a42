package fsops

import (
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/policy"
)

// WriteMntSkeleton makes dir, which must not exist yet, and writes the
// plan's /mnt skeleton into it: directories 0755, files 0444, symlinks.
// The sandbox binds it read-only at /mnt. Each entry is created relative
// to dir's descriptor, exclusively, and only inside a directory an
// earlier entry made: no entry goes through a symlink or replaces
// anything.
func WriteMntSkeleton(dir string, entries []policy.MntEntry) error {
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	defer unix.Close(fd)
	// The umask must not take the agent's read access away.
	if err := unix.Fchmod(fd, 0o755); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	dirs := map[string]bool{".": true}
	for _, e := range entries {
		if err := writeMntEntry(fd, e, dirs); err != nil {
			return fmt.Errorf("%s: %s: %w", dir, e.Path, err)
		}
	}
	return nil
}

func writeMntEntry(dirfd int, e policy.MntEntry, dirs map[string]bool) error {
	for _, c := range strings.Split(e.Path, "/") {
		if c == "" || c == "." || c == ".." || strings.IndexByte(c, 0) >= 0 {
			return fmt.Errorf("not a clean relative path")
		}
	}
	if !dirs[path.Dir(e.Path)] {
		return fmt.Errorf("its parent is not a directory of the skeleton")
	}
	switch e.Kind {
	case policy.MntDir:
		if err := unix.Mkdirat(dirfd, e.Path, 0o755); err != nil {
			return err
		}
		dirs[e.Path] = true
		return unix.Fchmodat(dirfd, e.Path, 0o755, 0)
	case policy.MntFile:
		f, err := unix.Openat(dirfd, e.Path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
		if err != nil {
			return err
		}
		defer unix.Close(f)
		if err := unix.Fchmod(f, 0o444); err != nil {
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
	case policy.MntLink:
		return unix.Symlinkat(e.Link, dirfd, e.Path)
	}
	return fmt.Errorf("unknown kind %q", e.Kind)
}
