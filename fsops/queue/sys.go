package queue

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// Every file operation of the protocol goes through the helpers in this
// file. They are relative to directory descriptors opened with O_NOFOLLOW,
// so a name is resolved exactly once, inside the directory we opened, and a
// symlink is never followed; and they count fsyncs, so tests and benchmarks
// can state exactly what durability costs.

// syncCount counts fsync(2) calls made by this package.
var syncCount atomic.Int64

// stepHook, when set, is called at every step boundary of the protocol with
// the step's name (see Steps). It exists only for the crash tests, which set
// it in a re-executed test binary to kill the process at one boundary. It is
// unexported and nothing outside this package's tests assigns it, so a
// production binary has no way — no environment variable, flag or file — to
// reach it.
var stepHook func(step string)

// step marks a step boundary.
func step(name string) {
	if stepHook != nil {
		stepHook(name)
	}
}

func pathErr(op, path string, err error) error {
	if err == unix.ELOOP {
		err = fsops.ErrSymlink
	}
	return &os.PathError{Op: op, Path: path, Err: err}
}

// openDirAt opens the directory name inside dirfd without following a
// symlink (ELOOP) and refusing anything else that is not a directory
// (ENOTDIR).
func openDirAt(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ENOTDIR {
			// O_DIRECTORY is checked before O_NOFOLLOW: name a symlink
			// for what it is.
			if st, serr := lstatAt(dirfd, name); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		return fd, err
	}
}

// fsyncFd fsyncs fd; path names it in errors.
func fsyncFd(fd int, path string) error {
	if err := fsync(fd); err != nil {
		return pathErr("fsync", path, err)
	}
	return nil
}

// fsync fsyncs fd, counting it, and returns the bare errno.
func fsync(fd int) error {
	syncCount.Add(1)
	for {
		err := unix.Fsync(fd)
		if err != unix.EINTR {
			return err
		}
	}
}

// lstatAt stats name inside dirfd without following a symlink.
func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

func isReg(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }
func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// kindOf names the file type of st for messages.
func kindOf(st *unix.Stat_t) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "unknown file type"
}

// exists reports whether anything (of any type, symlinks included) is at
// name inside dirfd.
// tmpfsEmptyDirSize is the size of an empty tmpfs directory: tmpfs counts
// 20 bytes for each entry of a directory, "." and ".." included, and
// nothing else (mm/shmem.c, BOGO_DIRENT_SIZE).
const tmpfsEmptyDirSize = 2 * 20

// emptyDir reports whether state directory d certainly holds no entry,
// from one fstat of its descriptor where its size counts its entries
// (tmpfs); false means only "not known to be empty". Finish asks it
// before the lookups of a job's names it expects to be absent: tmpfs
// keeps no negative dentries, so each such lookup allocated and freed
// one, much of a job cycle there, and the pending and failed directories
// are usually empty. An empty directory at that moment is the same
// observation as every name in it absent then.
func (q *Queue) emptyDir(d int) bool {
	if !q.sizeCounts[d] {
		return false
	}
	var st unix.Stat_t
	return unix.Fstat(q.fd[d], &st) == nil && st.Size == tmpfsEmptyDirSize
}

// emptyDirs asks emptyDir at most once per directory, for one finish.
type emptyDirs struct {
	q     *Queue
	known [numDirs]int8 // 0 not asked, 1 empty, -1 not known to be
}

func (e *emptyDirs) empty(d int) bool {
	if e.known[d] == 0 {
		e.known[d] = -1
		if e.q.emptyDir(d) {
			e.known[d] = 1
		}
	}
	return e.known[d] == 1
}

func exists(dirfd int, name string) (bool, error) {
	_, err := lstatAt(dirfd, name)
	switch {
	case err == nil:
		return true, nil
	case err == unix.ENOENT:
		return false, nil
	}
	return false, err
}

// renameNoReplace tries renameat2(RENAME_NOREPLACE) in state directory
// d. tried is false where d's filesystem lacks it (probed, see caps): the
// caller then uses the fallback that is atomic for what it moves.
func (q *Queue) renameNoReplace(d, olddir int, oldname string, newdir int, newname string) (tried bool, err error) {
	if c := &q.dcaps[d]; c.probed && !c.noReplace {
		return false, nil
	}
	err = unix.Renameat2(olddir, oldname, newdir, newname, unix.RENAME_NOREPLACE)
	if (err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP) && !q.caps(d).noReplace {
		return false, nil
	}
	return true, err
}

// linkNoReplace links oldname to newname in state directory d: link(2)
// fails on any existing entry, atomically on the server too. FUSE over
// SFTP reports that failure as EPERM, so a failed link whose target is
// there is the EEXIST it is; a link that fails on a filesystem without
// hard links is a refusal naming what it lacks.
func (q *Queue) linkNoReplace(d, olddir int, oldname string, newdir int, newname string) error {
	err := unix.Linkat(olddir, oldname, newdir, newname, 0)
	if err == nil || err == unix.EEXIST || err == unix.ENOENT {
		return err
	}
	if _, serr := lstatAt(newdir, newname); serr == nil {
		return unix.EEXIST
	}
	if _, serr := lstatAt(olddir, oldname); serr == unix.ENOENT {
		return unix.ENOENT
	}
	if !q.caps(d).links {
		return q.lacks(d)
	}
	return err
}

// installTemp moves the fsynced temporary tmp to name in the same
// directory (inside state directory d) without replacing anything there:
// RENAME_NOREPLACE, else link and unlink. The worst a crash between those
// two calls leaves is a stale temporary beside the file.
func (q *Queue) installTemp(d, dirfd int, tmp, name string) error {
	if tried, err := q.renameNoReplace(d, dirfd, tmp, dirfd, name); tried {
		return err
	}
	if err := q.linkNoReplace(d, dirfd, tmp, dirfd, name); err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, tmp, 0); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

// moveOwned moves a request to a name in state directory d that no other
// process may create: claimed/J/J inside the claimed/J this claim made
// with an exclusive mkdir, or done/J (failed/J) beside the J.result whose
// exclusive link decided who finishes. RENAME_NOREPLACE where the
// filesystem has it; elsewhere rename(2), with no check before it: the
// arbitration already won is the lock, and a request never has two names.
func (q *Queue) moveOwned(d, olddir int, oldname string, newdir int, newname string) error {
	if tried, err := q.renameNoReplace(d, olddir, oldname, newdir, newname); tried {
		return err
	}
	return unix.Renameat(olddir, oldname, newdir, newname)
}

// moveFree moves a request to a name in state directory d that others
// may create at the same moment (pending/J: publish --name, ingest and
// recover race for it). RENAME_NOREPLACE where the filesystem has it;
// elsewhere link(2), which fails on an existing entry atomically, then
// unlink of the old name. A crash between the two leaves the one file
// under both names; ingest and recover complete such a move (halfMoved).
func (q *Queue) moveFree(d, olddir int, oldname string, newdir int, newname string) error {
	if tried, err := q.renameNoReplace(d, olddir, oldname, newdir, newname); tried {
		return err
	}
	if err := q.linkNoReplace(d, olddir, oldname, newdir, newname); err != nil {
		return err
	}
	switch err := unix.Unlinkat(olddir, oldname, 0); err {
	case nil:
		return nil
	case unix.ENOENT:
		// Another process moved the old name on between our link and
		// unlink (a late finish renaming claimed/J/J beside its result):
		// that move stands, and our new name would be a second copy.
		unix.Unlinkat(newdir, newname, 0)
		return unix.ENOENT
	default:
		return err
	}
}

// sameFile reports whether a and b (regular files by name inside their
// directories) are two names of one file left by a move that stopped
// between its link and unlink: the same bytes, and two links each where
// the filesystem counts links (SFTP reports one for every file, and FUSE
// numbers each name, so there the bytes decide). Even were they two
// files, they hold the same request, so removing one name loses nothing.
func (q *Queue) sameFile(adir int, aname string, bdir int, bname string) bool {
	sa, err1 := lstatAt(adir, aname)
	sb, err2 := lstatAt(bdir, bname)
	counts := !strings.HasPrefix(q.fs.Type, "fuse")
	if err1 != nil || err2 != nil || !isReg(&sa) || !isReg(&sb) || sa.Size != sb.Size || counts && (sa.Nlink < 2 || sb.Nlink < 2) {
		return false
	}
	a, err1 := readFileAt(adir, aname, aname, MaxRequest)
	b, err2 := readFileAt(bdir, bname, bname, MaxRequest)
	return err1 == nil && err2 == nil && string(a) == string(b)
}

// fixMode sets mode on fd when the umask has removed some of its bits, so
// that the documented modes hold whatever umask the caller runs with.
func fixMode(fd int, mode uint32, path string) error {
	if fsops.Umask()&mode&0o777 == 0 {
		return nil
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return pathErr("chmod", path, err)
	}
	return nil
}

// parseTempName splits a temporary name (fsops.TempBase: the format
// recovery and inspection parse) into its target and the pid of the
// process that wrote it.
func parseTempName(name string) (target string, pid int, ok bool) {
	return fsops.ParseTempName(name)
}

// writeOpts are the fsops.WriteOpts of the three temporaries the protocol
// writes ("lease", "finish", "publish"): mode FileMode, fsyncs counted,
// and the step boundaries prefix+".temp-created", ".temp-written" and
// ".temp-synced". They are made once, so a write allocates none.
var writeOpts = map[string]*fsops.WriteOpts{}

func init() {
	for _, prefix := range []string{"lease", "finish", "publish"} {
		writeOpts[prefix] = &fsops.WriteOpts{Mode: FileMode, Fsync: fsync, Step: func(s string) {
			if stepHook != nil {
				stepHook(prefix + ".temp-" + s)
			}
		}}
	}
}

// writeTemp creates a sibling temporary for target inside dirfd with
// O_EXCL|O_NOFOLLOW, writes data, fsyncs and closes it, and returns its
// name (fsops.WriteTempAt). On failure the temporary is removed.
func writeTemp(dirfd int, dirPath, target string, data []byte, prefix string) (string, error) {
	tmp, err := fsops.WriteTempAt(dirfd, target, data, writeOpts[prefix])
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return "", pathErr(pe.Op, filepath.Join(dirPath, pe.Path), pe.Err)
		}
		return "", err
	}
	return tmp, nil
}

// dirEntry is one entry of a directory listing, with the type the kernel
// reported (unix.DT_UNKNOWN when the filesystem does not report types).
type dirEntry struct {
	Name string
	Type uint8
}

// relist returns a descriptor to list state directory d from the top,
// and what to call when done. Locally that is the Queue's own descriptor,
// rewound; on a remote filesystem a fresh one, since a FUSE directory
// handle read to its end (sshfs) lists nothing, or an old listing, again.
func (q *Queue) relist(d int) (int, func()) {
	if !q.fs.Remote {
		return q.fd[d], func() {}
	}
	fd, err := openDirAt(q.fd[d], ".")
	if err != nil {
		return q.fd[d], func() {}
	}
	return fd, func() { unix.Close(fd) }
}

// readDir lists the directory open at dirfd, sorted by name, without "."
// and "..". It rewinds and reads dirfd itself: every descriptor of a Queue
// belongs to one goroutine, and a listing always starts from the top.
func readDir(fd int, path string) ([]dirEntry, error) {
	return readDirBuf(fd, path, nil)
}

// readDirBuf is readDir with buf (nil: a new one) as the getdents buffer.
func readDirBuf(fd int, path string, buf []byte) ([]dirEntry, error) {
	var out []dirEntry
	err := eachEntry(fd, path, buf, true, func(name []byte, typ uint8) {
		out = append(out, dirEntry{Name: string(name), Type: typ})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b dirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// eachEntry calls fn for every entry of the directory open at fd except
// "." and "..", in the order the kernel lists them, starting from the top.
// name is valid only during the call. buf (nil: a new one) is the getdents
// buffer. rewind false reads from the descriptor's current offset, for a
// directory descriptor that was never read.
func eachEntry(fd int, path string, buf []byte, rewind bool, fn func(name []byte, typ uint8)) error {
	if rewind {
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			return pathErr("seek", path, err)
		}
	}
	if len(buf) == 0 {
		buf = make([]byte, dirBufSize)
	}
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return pathErr("readdir", path, err)
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen;
		// u8 d_type; char d_name[]; }
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return pathErr("readdir", path, unix.EIO)
			}
			typ := b[18]
			name := b[19:reclen]
			if i := indexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if !(len(name) == 1 && name[0] == '.') && !(len(name) == 2 && name[0] == '.' && name[1] == '.') {
				fn(name, typ)
			}
			b = b[reclen:]
		}
	}
}

// dirBufSize is the size of a getdents buffer.
const dirBufSize = 32 << 10

// buf returns this Queue's getdents buffer.
func (q *Queue) buf() []byte {
	if q.dirBuf == nil {
		q.dirBuf = make([]byte, dirBufSize)
	}
	return q.dirBuf
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// removeEntry unlinks name (a file, or an empty directory when dir) inside
// dirfd and fsyncs the directory. A missing entry is not an error: removal
// is part of idempotent cleanup that a crashed process may have half done.
// It reports whether it removed something.
func removeEntry(dirfd int, dirPath, name string, dir bool) (bool, error) {
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(dirfd, name, flags); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, pathErr("remove", filepath.Join(dirPath, name), err)
	}
	return true, fsyncFd(dirfd, dirPath)
}
