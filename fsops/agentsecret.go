package fsops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/policy"
)

// An agent's secrets (API keys) live in secret/NAME at the top of the tree,
// not in agent/NAME.d: every sandbox shows its agent's control directory,
// and iso landlock lets every agent read all of agent/ (the tool-trust
// rule needs every agent's definition), where Landlock can carve no file
// out of a directory it grants, nor follow a control that an atomic write
// replaces. Nothing a sandbox mounts and no Landlock rule reaches secret/,
// and the run host refuses a plan that would (sandboxplan.PlanExposes). The
// directory is 0711 (a user to whom root handed an agent opens that
// agent's file by name, and lists nothing), each file 0600. Only the run
// host reads a file, at the start of a run, into the program's
// environment; nothing of ctx writes a value anywhere else.

// SecretDirName is the tree's secret directory, at the top of the tree.
const SecretDirName = "secret"

// SecretDirMode is the mode ctx makes the secret directory with;
// SecretFileMode each agent's file's.
const (
	SecretDirMode  = 0o711
	SecretFileMode = 0o600
)

// SecretDir is the tree's secret directory.
func (r Root) SecretDir() string { return r.Path(SecretDirName) }

// SecretFile is agent's secret file.
func (r Root) SecretFile(agent string) string { return r.Path(SecretDirName, agent) }

// SecretError is a secret file (or its directory) that is not read: not
// readable by the caller, or not to be trusted. Denied marks the first
// (the caller may not read it), which is refused as a permission.
type SecretError struct {
	Path, Reason, Fix string
	Denied            bool
}

func (e *SecretError) Error() string {
	s := e.Path + ": " + e.Reason
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

// openSecretDir opens the tree's secret directory, with no symlink
// followed in its name, and checks who may list or change it: read-only
// for a caller who may read it, else (0711) an O_PATH descriptor, which
// opens a file by its name all the same. A missing directory is (-1, nil).
func (r Root) openSecretDir() (int, error) {
	dir := r.SecretDir()
	rootfd, err := unix.Open(r.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: r.Dir, Err: err}
	}
	defer unix.Close(rootfd)
	fd, err := unix.Openat(rootfd, SecretDirName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		fd, err = unix.Openat(rootfd, SecretDirName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, nil
	case err != nil:
		return -1, &os.PathError{Op: "open", Path: dir, Err: noFollowErr(err)}
	}
	if err := r.checkSecretDir(fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// checkSecretDir refuses a secret directory others may list or change.
func (r Root) checkSecretDir(fd int) error {
	var st unix.Stat_t
	if err := fstatRetry(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: r.SecretDir(), Err: err}
	}
	owner, err := r.TreeOwner()
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return &SecretError{Path: r.SecretDir(), Reason: "not a directory"}
	}
	if why := policy.SecretDirProblem(st.Uid, st.Mode&0o7777, owner); why != "" {
		return &SecretError{Path: r.SecretDir(), Reason: why,
			Fix: fmt.Sprintf("chown %d %s; chmod 711 %s", owner, ShellQuote(r.SecretDir()), ShellQuote(r.SecretDir()))}
	}
	return nil
}

// ReadSecretFile reads agent's secret file for a run whose agent belongs
// to agentOwner: nil and no error when the agent has none. A file the
// caller may not read, or one that others may read or change, or that a
// stranger owns, is a *SecretError, never a run without its secrets.
// At most ControlLimit bytes; a symlink is never followed.
func (r Root) ReadSecretFile(agent string, agentOwner uint32) ([]byte, error) {
	dfd, err := r.openSecretDir()
	if err != nil || dfd < 0 {
		return nil, err
	}
	defer unix.Close(dfd)
	path := r.SecretFile(agent)
	fd, err := unix.Openat(dfd, agent, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil
	case errors.Is(err, unix.EACCES):
		var st unix.Stat_t
		detail := ""
		if unix.Fstatat(dfd, agent, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			detail = fmt.Sprintf(" (owner uid %d, mode %04o)", st.Uid, st.Mode&0o7777)
		}
		return nil, &SecretError{Path: path, Denied: true,
			Reason: fmt.Sprintf("uid %d may not read agent %s's secrets%s, and the agent does not start without them", os.Geteuid(), agent, detail),
			Fix:    fmt.Sprintf("the file's owner or root starts it, or gives this user the file (chown %d %s)", os.Geteuid(), ShellQuote(path))}
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: path, Err: noFollowErr(err)}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := fstatRetry(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	owner, err := r.TreeOwner()
	if err != nil {
		return nil, err
	}
	if why := policy.SecretFileProblem(st.Uid, st.Mode&0o7777, st.Mode&unix.S_IFMT == unix.S_IFREG, owner, agentOwner); why != "" {
		return nil, &SecretError{Path: path, Reason: why, Fix: fmt.Sprintf("chmod 600 %s, and chown it to root, the tree owner or the agent's owner", ShellQuote(path))}
	}
	return readSecretFD(fd, path)
}

// readSecretFD reads the regular file fd, at most ControlLimit bytes.
func readSecretFD(fd int, path string) ([]byte, error) {
	if err := unix.SetNonblock(fd, false); err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, chunk)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return buf, nil
		}
		buf = append(buf, chunk[:n]...)
		if len(buf) > ControlLimit {
			return nil, &os.PathError{Op: "read", Path: path, Err: errnoError{unix.EFBIG, fmt.Sprintf("larger than %d bytes", ControlLimit)}}
		}
	}
}

// WriteSecretFile replaces agent's secret file with data (a whole file,
// checked by the caller), atomically and durably, mode 0600, owned by
// uid (a root caller gives the agent's owner its agent's file; -1 keeps
// the writer's). The directory is made 0711 when missing, owned by the
// tree owner; an existing one must pass the same checks as for reading.
// Empty data removes the file.
func (r Root) WriteSecretFile(agent string, data []byte, uid int) error {
	if err := r.makeSecretDir(); err != nil {
		return err
	}
	dfd, err := r.openSecretDir()
	if err != nil {
		return err
	}
	if dfd < 0 {
		return &os.PathError{Op: "open", Path: r.SecretDir(), Err: unix.ENOENT}
	}
	defer unix.Close(dfd)
	if len(data) == 0 {
		if err := unix.Unlinkat(dfd, agent, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return &os.PathError{Op: "remove", Path: r.SecretFile(agent), Err: err}
		}
		return Fsync(dfd)
	}
	if err := WriteAt(dfd, agent, data, &WriteOpts{Mode: SecretFileMode}); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			pe.Path = filepath.Join(r.SecretDir(), filepath.Base(pe.Path))
		}
		return err
	}
	if uid >= 0 && uid != os.Geteuid() {
		if err := unix.Fchownat(dfd, agent, uid, -1, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &os.PathError{Op: "chown", Path: r.SecretFile(agent), Err: err}
		}
	}
	return nil
}

// makeSecretDir makes the secret directory when it is missing: 0711,
// owned by the tree owner (a root caller in a user's tree makes it the
// user's). An existing one is left as it is.
func (r Root) makeSecretDir() error {
	dir := r.SecretDir()
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := MkdirNoFollow(dir, SecretDirMode); err != nil {
		return err
	}
	owner, err := r.TreeOwner()
	if err != nil {
		return err
	}
	if int(owner) != os.Geteuid() {
		return os.Lchown(dir, int(owner), -1)
	}
	return nil
}

// SecretEntry is what doctor sees of the secret directory or one of its
// entries: its name, owner, permission bits and type.
type SecretEntry struct {
	Name         string
	UID, Perm    uint32
	Dir, Regular bool
	Symlink      bool
}

func secretEntry(name string, st os.FileInfo) SecretEntry {
	e := SecretEntry{Name: name, Perm: uint32(st.Mode().Perm()), Dir: st.IsDir(), Regular: st.Mode().IsRegular(),
		Symlink: st.Mode()&os.ModeSymlink != 0}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		e.UID, e.Perm = sys.Uid, sys.Mode&0o7777
	}
	return e
}

// InspectSecrets describes the secret directory (nil when there is none)
// and its entries, without reading any file: what the caller may not list
// is an error beside the directory's description.
func (r Root) InspectSecrets() (*SecretEntry, []SecretEntry, error) {
	st, err := os.Lstat(r.SecretDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	dir := secretEntry(SecretDirName, st)
	if !dir.Dir {
		return &dir, nil, nil
	}
	names, err := os.ReadDir(r.SecretDir())
	if err != nil {
		return &dir, nil, err
	}
	var out []SecretEntry
	for _, n := range names {
		if st, err := os.Lstat(filepath.Join(r.SecretDir(), n.Name())); err == nil {
			out = append(out, secretEntry(n.Name(), st))
		}
	}
	return &dir, out, nil
}
