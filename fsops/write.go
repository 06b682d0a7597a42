package fsops

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// This file is ctx's one atomic writer. Everything is relative to a
// directory descriptor: a temporary sibling is created in the directory
// with O_EXCL|O_NOFOLLOW, written, fsynced, and renamed to its name
// (replacing, or never replacing: renameat2 RENAME_NOREPLACE), then the
// directory is fsynced. The queue (fsops/queue), which must survive a
// crash at any step, and object installation (fsops/object) use these
// primitives directly; WriteAtomic, WriteNew and WriteVolatile are the
// same writer for a path.

// selfPID is this process's pid in decimal. Go never forks without exec,
// so it cannot change; caching it saves a getpid(2) per temporary.
var selfPID = sync.OnceValue(func() string { return strconv.Itoa(os.Getpid()) })

// TempBase returns ".<target>.tmp-<pid>-<12 hex>", the name of a sibling
// temporary for target. The leading dot keeps temporaries out of listings
// and out of the queue's job namespace; the pid lets recovery tell a
// temporary of a dead writer (ParseTempName).
func TempBase(target string) string {
	var r [6]byte
	_ = RandomBytes(r[:])
	return "." + target + ".tmp-" + selfPID() + "-" + hex.EncodeToString(r[:])
}

// TempName returns the path of a sibling temporary for the path target
// (TempBase of its last element, in its directory).
func TempName(target string) string {
	return filepath.Join(filepath.Dir(target), TempBase(filepath.Base(target)))
}

// ParseTempName splits a name made by TempBase into its target and the
// pid of the process that wrote it.
func ParseTempName(name string) (target string, pid int, ok bool) {
	if !strings.HasPrefix(name, ".") {
		return "", 0, false
	}
	i := strings.LastIndex(name, ".tmp-")
	if i < 1 {
		return "", 0, false
	}
	pidStr, rnd, ok := strings.Cut(name[i+len(".tmp-"):], "-")
	if !ok || len(rnd) != 12 || strings.Trim(rnd, "0123456789abcdef") != "" {
		return "", 0, false
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != pidStr {
		return "", 0, false
	}
	return name[1:i], pid, true
}

// Umask is the process umask. It is read once, by umask(2) at package
// initialisation: the call sets the mask while it reads it, so it is made
// before main, when no goroutine of ctx's can be creating a file (the
// runtime's own never do), and put back at once: two system calls, where
// reading /proc/self/status, which tells it without changing it, means
// opening and parsing a file.
func Umask() uint32 { return processUmask }

var processUmask = func() uint32 {
	old := unix.Umask(0)
	unix.Umask(old)
	return uint32(old)
}()

// WriteOpts says how a file is written.
type WriteOpts struct {
	Mode      uint32 // the file's mode, whatever the umask
	NoSync    bool   // no fsync at all: atomic, not durable (WriteVolatile)
	NoReplace bool   // WriteAt never replaces an existing entry (EEXIST)
	// Fsync, when set, replaces fsync(2) (the queue counts its fsyncs).
	Fsync func(fd int) error
	// Step, when set, is called at the step boundaries of CreateAt:
	// "created", "written" and "synced" (the queue's crash tests).
	Step func(step string)
}

func (o *WriteOpts) fsync(fd int) error {
	if o.Fsync != nil {
		return o.Fsync(fd)
	}
	return Fsync(fd)
}

func (o *WriteOpts) step(name string) {
	if o.Step != nil {
		o.Step(name)
	}
}

// Fsync is fsync(2), retried on EINTR.
func Fsync(fd int) error {
	for {
		if err := unix.Fsync(fd); err != unix.EINTR {
			return err
		}
	}
}

// CreateAt creates name inside dirfd, never replacing and never following
// a symlink (O_EXCL|O_NOFOLLOW), with mode o.Mode, writes data, fsyncs it
// (unless o.NoSync) and closes it. On failure name is removed. Errors are
// *os.PathError naming name (relative to dirfd) and the step that failed.
func CreateAt(dirfd int, name string, data []byte, o *WriteOpts) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, o.Mode)
	if err != nil {
		return &os.PathError{Op: "create", Path: name, Err: err}
	}
	o.step("created")
	fail := func(op string, err error) error {
		unix.Close(fd)
		unix.Unlinkat(dirfd, name, 0)
		return &os.PathError{Op: op, Path: name, Err: err}
	}
	// O_CREAT applies the umask; the mode promised is o.Mode.
	if Umask()&o.Mode&0o777 != 0 {
		if err := unix.Fchmod(fd, o.Mode); err != nil {
			return fail("chmod", err)
		}
	}
	for off := 0; off < len(data); {
		n, err := unix.Write(fd, data[off:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fail("write", err)
		}
		off += n
	}
	o.step("written")
	if !o.NoSync {
		if err := o.fsync(fd); err != nil {
			return fail("fsync", err)
		}
	}
	if err := unix.Close(fd); err != nil {
		unix.Unlinkat(dirfd, name, 0)
		return &os.PathError{Op: "close", Path: name, Err: err}
	}
	o.step("synced")
	return nil
}

// WriteTempAt writes data to a fresh sibling temporary of target inside
// dirfd (CreateAt of TempBase(target)) and returns its name.
func WriteTempAt(dirfd int, target string, data []byte, o *WriteOpts) (string, error) {
	tmp := TempBase(target)
	if err := CreateAt(dirfd, tmp, data, o); err != nil {
		return "", err
	}
	return tmp, nil
}

// ErrNoReplaceUnsupported is RenameNoReplaceAt's error on a filesystem
// without renameat2(RENAME_NOREPLACE) (some FUSE and network ones).
var ErrNoReplaceUnsupported = errors.New("RENAME_NOREPLACE unsupported")

// noReplaceOff is set once renameat2(RENAME_NOREPLACE) has failed with
// EINVAL or ENOSYS; from then on callers use their fallbacks at once.
var noReplaceOff atomic.Bool

// RenameNoReplaceAt renames without replacing anything at the target,
// even a dangling symlink (EEXIST). It returns the bare errno, or
// ErrNoReplaceUnsupported where the filesystem cannot do it; the caller
// picks the fallback that is safe for what it moves (InstallTempAt links).
func RenameNoReplaceAt(olddir int, oldname string, newdir int, newname string) error {
	if !noReplaceOff.Load() {
		err := unix.Renameat2(olddir, oldname, newdir, newname, unix.RENAME_NOREPLACE)
		if err != unix.EINVAL && err != unix.ENOSYS {
			return err
		}
		noReplaceOff.Store(true)
	}
	return ErrNoReplaceUnsupported
}

// InstallTempAt moves the temporary tmp to name in the same directory
// without replacing anything there. Without RENAME_NOREPLACE it links and
// unlinks: link(2) fails with EEXIST on any existing entry, and the worst
// a crash between the two calls leaves is a stale temporary beside the
// file. It returns the bare errno.
func InstallTempAt(dirfd int, tmp, name string) error {
	err := RenameNoReplaceAt(dirfd, tmp, dirfd, name)
	if err != ErrNoReplaceUnsupported {
		return err
	}
	if err := unix.Linkat(dirfd, tmp, dirfd, name, 0); err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, tmp, 0); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

// WriteAt writes data to name inside dirfd atomically: a temporary
// sibling (WriteTempAt), renamed to name (never replacing with
// o.NoReplace), then the directory fsynced (unless o.NoSync). Without the
// file fsync a crash after the rename may leave an empty file; without
// the directory fsync the rename itself may be lost. On failure the
// temporary is gone and name is as it was. The error names name; the
// rename's is an *os.LinkError.
func WriteAt(dirfd int, name string, data []byte, o *WriteOpts) error {
	tmp, err := WriteTempAt(dirfd, name, data, o)
	if err != nil {
		return err
	}
	switch {
	case o.NoReplace:
		err = InstallTempAt(dirfd, tmp, name)
	case o.NoSync:
		err = exchangeTempAt(dirfd, tmp, name)
	default:
		err = unix.Renameat(dirfd, tmp, dirfd, name)
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return &os.LinkError{Op: "rename", Old: tmp, New: name, Err: err}
	}
	if o.NoSync {
		return nil
	}
	if err := o.fsync(dirfd); err != nil {
		return &os.PathError{Op: "fsync", Path: ".", Err: err}
	}
	return nil
}

// exchangeTempAt puts the temporary tmp in name's place for a write
// without fsync: the two are exchanged (RENAME_EXCHANGE) and the old
// contents, now under tmp, removed. Readers see the old or the new
// contents, as with a rename over name, but ext4 flushes the data of a
// file renamed over another (auto_da_alloc) and not of one exchanged with
// it: that flush made each replace wait for the disk, and a run writes
// its status and state nine times. The flush is what a crash
// would have kept; without it a crash may leave name empty, which its
// readers take as the default (idle, no pid). A name that does not exist
// yet, or a filesystem without the exchange, gets the plain rename.
func exchangeTempAt(dirfd int, tmp, name string) error {
	err := unix.Renameat2(dirfd, tmp, dirfd, name, unix.RENAME_EXCHANGE)
	switch err {
	case nil:
	case unix.ENOENT, unix.EINVAL, unix.ENOSYS:
		return unix.Renameat(dirfd, tmp, dirfd, name)
	default:
		return err
	}
	if err := unix.Unlinkat(dirfd, tmp, 0); err != nil {
		// Not a file any more (a directory put there in between): put
		// it back where it was, and leave our data under tmp for the
		// caller to remove.
		unix.Renameat2(dirfd, tmp, dirfd, name, unix.RENAME_EXCHANGE)
		return err
	}
	return nil
}

// writePath is WriteAt for a path: its directory is opened (following
// symlinks in the directory part only, as open(2) of the path would) and
// errors name the path.
func writePath(path string, data []byte, o *WriteOpts) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	defer unix.Close(dfd)
	err = WriteAt(dfd, base, data, o)
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe) && pe.Op == "create":
		// Name the file the caller asked for, not our temporary.
		return &os.PathError{Op: "write", Path: path, Err: pe.Err}
	case errors.As(err, &pe):
		return &os.PathError{Op: pe.Op, Path: filepath.Join(dir, pe.Path), Err: pe.Err}
	case errors.As(err, &le):
		return &os.LinkError{Op: le.Op, Old: filepath.Join(dir, le.Old), New: path, Err: le.Err}
	}
	return err
}

// WriteAtomic replaces the file at path with data, durably (WriteAt: a
// sibling temporary, fsynced, renamed over path, the directory fsynced).
// A failed write leaves path exactly as it was.
//
// A symlink or non-regular file at path is refused, never written through
// or replaced.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	if err := checkReplaceable(path); err != nil {
		return err
	}
	return writePath(path, data, &WriteOpts{Mode: uint32(perm.Perm())})
}

// WriteVolatile replaces the file at path atomically but without fsync:
// readers see the old or the new contents, never a mix, but a crash may
// lose the change or leave the file empty (exchangeTempAt). It is for
// runtime state that describes live processes
// (an agent's status and pid, a session's state), which a crash makes
// stale anyway and which readers check against the processes themselves.
func WriteVolatile(path string, data []byte, perm os.FileMode) error {
	if err := checkReplaceable(path); err != nil {
		return err
	}
	return writePath(path, data, &WriteOpts{Mode: uint32(perm.Perm()), NoSync: true})
}

// WriteNew creates path with data, durably, and never replaces anything
// (WriteAt with NoReplace): it fails with EEXIST when path exists, even as
// a dangling symlink. On any failure nothing is left at path and the
// temporary is gone.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	return writePath(path, data, &WriteOpts{Mode: uint32(perm.Perm()), NoReplace: true})
}

func checkReplaceable(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case st.Mode()&os.ModeSymlink != 0:
		return &os.PathError{Op: "write", Path: path, Err: ErrSymlink}
	case !st.Mode().IsRegular():
		return &os.PathError{Op: "write", Path: path, Err: notRegular(st.Mode())}
	}
	return nil
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func SyncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	if err := Fsync(fd); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

// RenameNoReplace renames oldpath to newpath unless newpath exists (even as
// a dangling symlink), with renameat2(RENAME_NOREPLACE), then fsyncs the
// directory of newpath. It has no fallback: what it moves may be a
// directory, which cannot be linked.
func RenameNoReplace(oldpath, newpath string) error {
	if err := RenameNoReplaceAt(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return SyncDir(filepath.Dir(newpath))
}
