package fsops

import (
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"ctx/policy"
)

// DirNames lists the names in directory dir (without . and .., in no
// particular order), as os.ReadDir would, on the bare descriptor: an
// os.File for a directory is offered to Go's poller, and the first one
// sets the poller up, which a tool call listing its (mostly empty) hook
// directories paid at every start.
func DirNames(dir string) ([]string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return dirNamesFD(fd, dir)
}

// dirNamesFD lists the directory open as fd (named dir in errors) as
// DirNames does, leaving fd open.
func dirNamesFD(fd int, dir string) ([]string, error) {
	var names []string
	buf := make([]byte, 8<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// DirEntryFacts are the facts (lstat, never following a symlink) of the
// entries of directory dir, sorted by name, at most max of them: more
// reports that there were others.
func DirEntryFacts(dir string, max int) (facts []policy.FileFacts, more bool, err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, &os.PathError{Op: "open", Path: dir, Err: noFollowErr(err)}
	}
	defer unix.Close(fd)
	names, err := dirNamesFD(fd, dir)
	if err != nil {
		return nil, false, err
	}
	if len(names) > max {
		return nil, true, nil
	}
	slices.Sort(names)
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue // removed meanwhile
			}
			return nil, false, &os.PathError{Op: "lstat", Path: dir + "/" + name, Err: err}
		}
		facts = append(facts, statFacts(dir+"/"+name, &st))
	}
	return facts, false, nil
}
