package queue

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// Errors that tell callers which exit status fits; match them with
// errors.Is. Every error returned by this package also carries a message
// naming the job and the path involved.
var (
	// ErrEmpty: claim found no pending job it could claim.
	ErrEmpty = errors.New("no claimable job in pending/")
	// ErrInvalid: a bad name, status, size or request body.
	ErrInvalid = errors.New("invalid")
	// ErrConflict: the transition would overwrite or contradict evidence
	// already on disk, or the job is not in the state the verb needs.
	ErrConflict = errors.New("conflict")
	// ErrNotFound: no evidence of the job exists at all.
	ErrNotFound = errors.New("no such job")
	// ErrNotMounted: the space's directory is there but its queue is not
	// (the network filesystem holding it is not mounted, or went away).
	ErrNotMounted = errors.New("shared space not mounted")
)

// Limits on what the queue stores.
const (
	MaxRequest = 1 << 20 // a request file (JSON), as tool input
	MaxResult  = 4 << 20 // a result file
)

// Modes of what the queue creates. The directories of a space are 2770:
// owner and group may read, create and rename, others nothing, and the
// setgid bit makes every file and directory created inside inherit the
// space's group, so a group of users or agents shares one queue. Files are
// 0640: the group reads requests, results and leases; moving and removing
// them needs only write access to the directory, never to the file.
const (
	DirMode  = 0o2770
	FileMode = 0o640
	LogMode  = 0o660
	// jobDirMode is the mode of claimed/J and lease/J.
	jobDirMode = 0o2770
)

// State directories inside queue/, in the order of their descriptors.
const (
	dInbox = iota
	dPending
	dLease
	dClaimed
	dDone
	dFailed
	numDirs
)

// StateDirs names the directories of a queue, as created by CreateSpace.
var StateDirs = [numDirs]string{"inbox", "pending", "lease", "claimed", "done", "failed"}

// LogName is the queue's event log inside queue/: JSONL lines of
// queue.claim, queue.finish and queue.recover events. It lives beside the
// state directories, near the object it describes, as tool/NAME.d/log does.
const LogName = "log"

// Actor is recorded in the queue's events: who acted, when known.
type Actor struct {
	Agent, Session, Run string
}

// Queue is an open queue: descriptors for queue/ and each state directory,
// all opened without following symlinks. A Queue is not safe for
// concurrent use by several goroutines; open one per goroutine (they
// arbitrate through the filesystem exactly as separate processes do).
type Queue struct {
	Space string
	Dir   string // <root>/shared/SPACE/queue, for messages and printed paths
	Actor Actor
	// OnLogError is told when an event cannot be appended to the log. The
	// transition itself has already happened and stands.
	OnLogError func(error)

	qfd      int
	fd       [numDirs]int
	dirPaths [numDirs]string
	logFd    int
	// dirBuf is the getdents buffer of this Queue's listings.
	dirBuf []byte

	// candidates is the rest of the last listing of pending/, in claim
	// order. Claim works through it before listing again, so a worker
	// taking many jobs reads the directory once per batch, not per job.
	candidates []string
	// leases caches the identity part of each owner's lease.
	leases map[Owner]Lease
	// held are the directories of claims this Queue made and has not
	// finished (see hold).
	held map[string]heldClaim
	// sizeCounts marks the state directories whose size counts their
	// entries (tmpfs): see emptyDir.
	sizeCounts [numDirs]bool
	// fs is the filesystem of queue/ (statFS); dcaps what a probe found
	// in each state directory (caps), probed only where needed.
	fs    FSInfo
	dcaps [numDirs]dirCaps
}

// Open opens the queue of shared space space under the /ctx tree root. The
// root itself may be reached through symlinks (it is the operator's
// choice); shared/, SPACE, queue/ and every state directory must be real
// directories: a symlink anywhere below the root is refused with ELOOP.
func Open(root, space string) (*Queue, error) {
	if err := ValidSpaceName(space); err != nil {
		return nil, fmt.Errorf("%w: space: %v", ErrInvalid, err)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathErr("open", root, err)
	}
	path := root
	for _, c := range []string{"shared", space, "queue"} {
		path = filepath.Join(path, c)
		next, err := openDirAt(fd, c)
		if err == unix.ENOENT && c == "queue" {
			unix.Close(fd)
			return nil, fmt.Errorf("%w: shared space %s: %s has no queue/: if the space lives on a network filesystem, it is not mounted there; mount it (ctx shared new here would start a separate, local queue)",
				ErrNotMounted, space, filepath.Dir(path))
		}
		unix.Close(fd)
		if err == unix.ENOTCONN || err == unix.ESTALE {
			return nil, fmt.Errorf("%w: shared space %s: %v", ErrNotMounted, space, pathErr("open", path, err))
		}
		if err != nil {
			return nil, pathErr("open", path, err)
		}
		fd = next
	}
	q := &Queue{Space: space, Dir: path, qfd: fd, logFd: -1, leases: map[Owner]Lease{}, held: map[string]heldClaim{}}
	for i := range q.fd {
		q.fd[i] = -1
	}
	q.fs = statFS(fd)
	for i, name := range StateDirs {
		q.dirPaths[i] = filepath.Join(path, name)
		if q.fd[i], err = openDirAt(fd, name); err != nil {
			q.Close()
			return nil, pathErr("open", filepath.Join(path, name), err)
		}
		var sfs unix.Statfs_t
		q.sizeCounts[i] = unix.Fstatfs(q.fd[i], &sfs) == nil && sfs.Type == unix.TMPFS_MAGIC
	}
	return q, nil
}

// Close releases the queue's descriptors.
func (q *Queue) Close() error {
	for j := range q.held {
		q.release(j)
	}
	for i, fd := range q.fd {
		if fd >= 0 {
			unix.Close(fd)
			q.fd[i] = -1
		}
	}
	if q.logFd >= 0 {
		unix.Close(q.logFd)
		q.logFd = -1
	}
	if q.qfd >= 0 {
		unix.Close(q.qfd)
		q.qfd = -1
	}
	return nil
}

// path joins elements under queue/ for messages and output. Names the
// queue itself made (state directories, validated job names, temporaries)
// need no cleaning and are joined with a single allocation.
func (q *Queue) path(elem ...string) string {
	n := len(q.Dir)
	for _, e := range elem {
		if e == "" || e == "." || e == ".." || strings.IndexByte(e, '/') >= 0 {
			return filepath.Join(append([]string{q.Dir}, elem...)...)
		}
		n += 1 + len(e)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(q.Dir)
	for _, e := range elem {
		b.WriteByte('/')
		b.WriteString(e)
	}
	return b.String()
}

// dirPath is the path of state directory d, for messages; computed once.
func (q *Queue) dirPath(d int) string { return q.dirPaths[d] }

// PendingPath, ClaimedPath and TerminalPath are where J's request lives in
// each state.
func (q *Queue) PendingPath(job string) string { return q.path("pending", job) }
func (q *Queue) ClaimedPath(job string) string { return q.path("claimed", job, job) }
func (q *Queue) TerminalPath(st Status, job string) string {
	return q.path(string(st), job)
}
func (q *Queue) ResultPath(st Status, job string) string {
	return q.path(string(st), resultName(job))
}

// Status is how a finished job ended: its terminal directory.
type Status string

const (
	Done   Status = "done"
	Failed Status = "failed"
)

// ParseStatus accepts "done" or "failed".
func ParseStatus(s string) (Status, error) {
	switch Status(s) {
	case Done, Failed:
		return Status(s), nil
	}
	return "", fmt.Errorf("%w: status %q: must be done or failed", ErrInvalid, s)
}

func (st Status) dir() int {
	if st == Failed {
		return dFailed
	}
	return dDone
}

// logEvent appends one event line to queue/log with a single O_APPEND
// write. The log is facts, not protocol state: it is not fsynced, and a
// failure to write it is reported through OnLogError, never undoing the
// transition it describes.
//
// On a remote filesystem each host appends to its own log, queue/log.HOST
// (HostLogName): a FUSE or network client splits one write at page
// boundaries into several requests, and two hosts appending to one file
// interleave those pieces. One host's writes to its own file go through
// one client, which holds the file's lock across the pieces. A write that
// the kernel cuts short is reported, never retried into a torn line.
func (q *Queue) logEvent(ev fsops.Event) {
	name := LogName
	if q.fs.Remote {
		name = HostLogName()
	}
	if q.logFd < 0 {
		fd, err := unix.Openat(q.qfd, name, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, LogMode)
		if err == nil {
			var st unix.Stat_t
			if err = unix.Fstat(fd, &st); err == nil && !isReg(&st) {
				err = fsops.ErrNotRegular
			}
			if err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			q.logError(pathErr("open", q.path(name), err))
			return
		}
		q.logFd = fd
	}
	ev.Agent, ev.Session, ev.Run = q.Actor.Agent, q.Actor.Session, q.Actor.Run
	line := ev.Line()
	if n, err := unix.Write(q.logFd, line); err != nil {
		q.logError(pathErr("append", q.path(name), err))
	} else if n != len(line) {
		q.logError(pathErr("append", q.path(name), fmt.Errorf("short write: %d of %d bytes", n, len(line))))
	}
}

// HostLogName is this host's event log inside queue/ on a remote
// filesystem: "log." and the host name, reduced to letters, digits, '.',
// '_' and '-'.
func HostLogName() string {
	var u unix.Utsname
	host := "localhost"
	if unix.Uname(&u) == nil {
		if n := unix.ByteSliceToString(u.Nodename[:]); n != "" {
			host = n
		}
	}
	b := []byte(host)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return LogName + "." + string(b)
}

func (q *Queue) logError(err error) {
	if q.OnLogError != nil {
		q.OnLogError(err)
	}
}

func (q *Queue) object(job string) string {
	return "shared/" + q.Space + "/queue/" + job
}

// errnoName returns the errno name an error wraps, for events.
func errnoName(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	switch {
	case errors.Is(err, ErrConflict):
		return "EEXIST"
	case errors.Is(err, ErrNotFound):
		return "ENOENT"
	case errors.Is(err, ErrInvalid):
		return "EINVAL"
	}
	return "EIO"
}

// conflictf builds an ErrConflict error.
func conflictf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConflict, fmt.Sprintf(format, args...))
}
