package fsops

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// MaxDiskDepth bounds how deep DiskUsage descends: one descriptor is open
// per level, and a home nested deeper than this is refused rather than
// measured in part (data below the limit would go uncounted).
const MaxDiskDepth = 256

// DiskUsage is what dir holds on disk: the blocks allocated to every file,
// directory and link under it (st_blocks, so a sparse file counts what it
// occupies), each inode once however many names it has, the top-level
// entries named in skip left out. Nothing is followed through a symlink,
// every directory is opened from its parent's descriptor (an agent that
// swaps a directory for a link mid-walk sends it nowhere), and what lies on
// another filesystem (a mount point) is not descended into. A dir that does
// not exist holds 0.
func DiskUsage(dir string, skip ...string) (uint64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return 0, nil
	}
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	w := diskWalk{dev: st.Dev, seen: map[[2]uint64]bool{}, skip: map[string]bool{}}
	for _, s := range skip {
		w.skip[s] = true
	}
	w.total = uint64(st.Blocks) * 512
	err = w.dir(fd, dir, 0)
	return w.total, err
}

type diskWalk struct {
	dev   uint64
	total uint64
	seen  map[[2]uint64]bool // inodes with several names, counted once
	skip  map[string]bool    // top-level names left out
}

// dir adds what the directory fd (closed on return) holds.
func (w *diskWalk) dir(fd int, name string, depth int) error {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if depth >= MaxDiskDepth {
		return fmt.Errorf("%s: deeper than %d levels; not measured", name, MaxDiskDepth)
	}
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if depth == 0 && w.skip[n] {
				continue
			}
			if err := w.entry(fd, name, n, depth); err != nil {
				return err
			}
		}
		if err == io.EOF || errors.Is(err, unix.ENOENT) {
			return nil // the end, or a directory removed meanwhile
		}
		if err != nil {
			return err // unreadable: not measured, never taken for empty
		}
	}
}

// entry adds one name of the directory dirfd.
func (w *diskWalk) entry(dirfd int, dir, n string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.ENOENT {
		return nil // gone meanwhile: it holds nothing now
	} else if err != nil {
		return &os.PathError{Op: "stat", Path: dir + "/" + n, Err: err}
	}
	if st.Dev != w.dev {
		return nil // a mount point: another filesystem's
	}
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		key := [2]uint64{st.Dev, st.Ino}
		if w.seen[key] {
			return nil
		}
		w.seen[key] = true
	}
	w.total += uint64(st.Blocks) * 512
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	sub, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
		return nil // replaced meanwhile
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: dir + "/" + n, Err: err}
	}
	return w.dir(sub, dir+"/"+n, depth+1)
}
