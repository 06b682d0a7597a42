package fsops

import (
	"encoding/binary"
	"os"

	"golang.org/x/sys/unix"
)

// The listing the protect walks make of every directory of a workspace
// (the search for protected paths at the start of a run, the census at
// its start and end): a workspace of 100,000 files lists them all, twice
// at the start. Most names are files nobody looks at; what a walk needs
// of a directory is which of a few names are there and what its
// subdirectories are (DirSketch). os.ReadDir made an os.File (a
// directory is offered to the poller), a string and a DirEntry per name,
// and sorted them.

// DirScanner lists directories into one buffer it reuses.
type DirScanner struct {
	buf []byte
}

// dirScanBuf is the getdents buffer: a directory of a few hundred names
// in one call.
const dirScanBuf = 32 << 10

// Scan calls fn with every entry of directory dir (not . and ..), never
// following a symlink at dir's end, and returns dir's owner and mode.
// name is valid only during the call (it lies in the scanner's buffer):
// a caller that keeps it copies it (string(name)). isDir is the entry's
// type as the directory records it, lstat'ed where the filesystem
// records none; a symlink is not a directory. mode is 0 when dir could
// not be opened; a listing cut short by an error keeps what it read.
func (s *DirScanner) Scan(dir string, fn func(name []byte, isDir bool)) (uid, mode uint32, err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return 0, 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, 0, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if s.buf == nil {
		s.buf = make([]byte, dirScanBuf)
	}
	for {
		n, err := unix.Getdents(fd, s.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return st.Uid, st.Mode, &os.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			return st.Uid, st.Mode, nil
		}
		scanDirents(fd, s.buf[:n], fn)
	}
}

// scanDirents calls fn with each record of a getdents64 buffer
// (struct linux_dirent64: ino 8 bytes, off 8, reclen 2, type 1, the
// name NUL-terminated), the directory open as fd.
func scanDirents(fd int, b []byte, fn func(name []byte, isDir bool)) {
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			return
		}
		typ, name := b[18], b[19:reclen]
		b = b[reclen:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		isDir := typ == unix.DT_DIR
		if typ == unix.DT_UNKNOWN {
			var st unix.Stat_t
			isDir = unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
		}
		fn(name, isDir)
	}
}

// DirSketch is what a walk needs of one directory: which of the names it
// looks for are there (each with whether it is a directory), and the
// names of its subdirectories, but .git.
type DirSketch struct {
	Found   map[string]bool
	Subdirs []string
}

// Has reports whether name is among the directory's entries (it must be
// one the sketch looked for).
func (d DirSketch) Has(name string) bool {
	_, ok := d.Found[name]
	return ok
}

// Sketch lists dir for a walk looking for the names in wanted.
func (s *DirScanner) Sketch(dir string, wanted map[string]bool) (sk DirSketch, uid, mode uint32, err error) {
	uid, mode, err = s.Scan(dir, func(name []byte, isDir bool) {
		if wanted[string(name)] {
			if sk.Found == nil {
				sk.Found = map[string]bool{}
			}
			sk.Found[string(name)] = isDir
		}
		if isDir && string(name) != ".git" {
			sk.Subdirs = append(sk.Subdirs, string(name))
		}
	})
	return sk, uid, mode, err
}
