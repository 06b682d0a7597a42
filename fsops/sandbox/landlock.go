package sandbox

// Landlock is the second wall of DESIGN.md section 16 rule 6 (and the whole
// wall in `iso landlock`): even if a mount were wrong, the agent's processes
// reach only the file hierarchies, TCP ports, signals and abstract sockets
// the plan grants. Built on x/sys alone: no cgo, no libc wrappers.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// LandlockRule grants access beneath one file hierarchy (or to one file).
// Every rule implies read (READ_FILE, READ_DIR). Rules attach to the inode
// found when ApplyLandlock runs, not to the name: a mount placed over Path
// afterwards is not covered.
type LandlockRule struct {
	Path     string // absolute; no component may be a symlink
	Write    bool   // write, truncate, create (make_*), remove, and link/rename across directories (REFER)
	Exec     bool   // execute files beneath Path
	Dev      bool   // ioctl on device files beneath Path (ABI 5+), for /dev
	Optional bool   // skip the rule when Path does not exist or is a symlink
	Connect  bool   // connect to unix sockets beneath Path (ABI 9+)
	KeepDirs bool   // with Write: no directory beneath Path may be removed or renamed
	// Inherited, instead of Path, names a descriptor the process already
	// holds (a terminal on stdin): the rule attaches to its file, which may
	// lie outside the sandbox's tree (the host's PTY), so that reopening
	// it through /dev/stdout keeps working.
	Inherited *int
}

// LandlockPolicy is everything one ApplyLandlock call enforces. Whatever is
// not granted by a rule is denied, for every right the kernel can handle.
type LandlockPolicy struct {
	Rules   []LandlockRule
	DenyTCP bool // ABI 4+: no TCP bind or connect at all
	// ConnectTCP, with DenyTCP, is the one TCP port connect is allowed
	// to (the run host's egress proxy, iso landlock): any address at
	// that port, as Landlock's rules name ports only.
	ConnectTCP uint16
	Scope      bool // ABI 6+: no signal and no abstract unix socket connect outside the domain
	// WriteOnly handles the write rights alone (iso shared's protected
	// paths): reading and executing stay as the uid's permissions have
	// them, and only writing needs a rule.
	WriteOnly bool
}

// Filesystem rights by the ABI version that introduced them. A ruleset
// must handle only rights the running kernel knows (EINVAL otherwise), so
// the handled set is built by version.
const (
	landlockFSv1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	// ABI 1 always denies reparenting (link or rename to another
	// directory, EXDEV); from ABI 2 it is the REFER right.
	landlockFSv2 = landlockFSv1 | unix.LANDLOCK_ACCESS_FS_REFER
	// Below ABI 3 truncate(2) and O_TRUNC cannot be restricted.
	landlockFSv3 = landlockFSv2 | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	// Below ABI 5 ioctl on devices cannot be restricted.
	landlockFSv5 = landlockFSv3 | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// Below ABI 9 connecting to a pathname unix socket cannot be
	// restricted.
	landlockFSv9 = landlockFSv5 | unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX

	// Rights a rule on a non-directory may carry: the kernel refuses a
	// rule on a file that carries directory rights (EINVAL).
	landlockFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV | unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX

	// Read comes with every rule. RESOLVE_UNIX (connecting to a pathname
	// unix socket) only with a rule's Connect: a namespace sandbox gives
	// it to every rule (its mounts are what it may reach), iso landlock
	// only to its run directory, where the broker's socket is.
	landlockReadRights = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// REFER goes with write: without it a rename or link between two
	// directories of a writable tree fails with EXDEV (mv, git, editors'
	// atomic saves across directories).
	landlockWriteRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER

	landlockTCPRights   = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	landlockScopeRights = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
)

// ABI versions that brought the features ApplyLandlock uses.
const (
	landlockABINet   = 4 // handled_access_net: TCP bind and connect
	landlockABIScope = 6 // scoped: signals and abstract unix sockets
	// LandlockABIScope is landlockABIScope for the run host's unix gate.
	LandlockABIScope = landlockABIScope
	// LandlockABINet is landlockABINet for the run host's egress.
	LandlockABINet   = landlockABINet
	landlockABITSync = 8 // LANDLOCK_RESTRICT_SELF_TSYNC: every thread of the process
	// LandlockABIResolveUnix brought LANDLOCK_ACCESS_FS_RESOLVE_UNIX:
	// connecting to pathname unix sockets is a right.
	LandlockABIResolveUnix = 9
)

// landlockHandledFS is every filesystem right the kernel's ABI knows (and
// this file knows: a newer kernel gets the newest set listed here).
func landlockHandledFS(abi int) uint64 {
	switch {
	case abi >= 9:
		return landlockFSv9
	case abi >= 5:
		return landlockFSv5
	case abi >= 3:
		return landlockFSv3
	case abi >= 2:
		return landlockFSv2
	default:
		return landlockFSv1
	}
}

// landlockRulesetAttr is struct landlock_ruleset_attr up to the fields ctx
// uses. The kernel takes a size with it: it accepts a shorter struct from
// older callers and refuses (E2BIG) nonzero bytes it does not know, so the
// size passed covers only the fields this call sets (x/sys's struct has
// grown fields newer kernels know).
type landlockRulesetAttr struct {
	handledAccessFS  uint64 // ABI 1
	handledAccessNet uint64 // ABI 4
	scoped           uint64 // ABI 6
}

func (a *landlockRulesetAttr) size() uintptr {
	switch {
	case a.scoped != 0:
		return unsafe.Sizeof(*a)
	case a.handledAccessNet != 0:
		return unsafe.Offsetof(a.scoped)
	default:
		return unsafe.Offsetof(a.handledAccessNet)
	}
}

// LandlockABI returns the kernel's Landlock ABI version, or 0 and the
// reason when Landlock cannot be used.
func LandlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, landlockUnavailable(errno)
	}
	return int(v), nil
}

// landlockUnavailable explains the kernel's refusal in terms a person can
// act on, keeping the errno for errors.Is.
func landlockUnavailable(errno syscall.Errno) error {
	switch errno {
	case unix.ENOSYS:
		return fmt.Errorf("the kernel is built without Landlock (%w)", errno)
	case unix.EOPNOTSUPP:
		return fmt.Errorf("landlock is built in but not enabled at boot: add landlock to lsm= (%w)", errno)
	default:
		// For example EPERM from a container's seccomp filter.
		return fmt.Errorf("landlock_create_ruleset refused: %w", errno)
	}
}

// ApplyLandlock restricts the calling thread, and every process it forks
// from then on, to p: every filesystem right the running ABI knows is
// handled, so whatever no rule grants is denied. It returns the ABI applied
// and one line for /mnt/proc/policy, e.g.
//
//	landlock abi=7 fs=enforced tcp=denied scope=signal,abstract-unix threads=caller
//
// Without Landlock (ABI 0) it returns (0, "landlock unavailable: <why>",
// nil) and changes nothing: the caller goes on without this wall. Features
// the ABI lacks are named in the line ("tcp=unsupported") and not an error:
// the other walls (namespaces, seccomp) still stand.
//
// The caller's contract:
//   - Call it on the thread that will fork the agent, locked with
//     runtime.LockOSThread, and fork every child from that thread. Landlock
//     restricts a thread, not a process, unless the kernel has
//     LANDLOCK_RESTRICT_SELF_TSYNC (ABI 8, "threads=all"); below that
//     ("threads=caller") the Go runtime's other threads stay unrestricted,
//     and a child forked from one of them would escape. ApplyLandlock locks
//     the thread once more and never unlocks it, so the restricted thread
//     never returns to the scheduler, and exits with its goroutine.
//   - With Scope, the restricted domain cannot signal processes forked from
//     other threads before TSYNC: they are outside its domain.
//   - Paths resolve in the caller's root and mount namespace (after
//     pivot_root: paths inside the new root).
//   - Descriptors already open keep their access: Landlock checks at open.
//
// It sets no_new_privs on the thread itself (idempotent), which the kernel
// requires of a caller without CAP_SYS_ADMIN. On error nothing is
// restricted, though no_new_privs may already be set.
func ApplyLandlock(p LandlockPolicy) (int, string, error) {
	abi, err := LandlockABI()
	if err != nil {
		return 0, "landlock unavailable: " + err.Error(), nil
	}
	attr := landlockRulesetAttr{handledAccessFS: landlockHandledFS(abi)}
	if p.WriteOnly {
		attr.handledAccessFS &= landlockWriteRights
	}
	tcp := "allowed"
	if p.DenyTCP {
		tcp = "unsupported"
		if abi >= landlockABINet {
			// Handled with no port rule: every TCP bind and connect is
			// denied, loopback included.
			attr.handledAccessNet = landlockTCPRights
			tcp = "denied"
		}
	}
	scope := "none"
	if p.Scope {
		scope = "unsupported"
		if abi >= landlockABIScope {
			attr.scoped = landlockScopeRights
			scope = "signal,abstract-unix"
		}
	}

	rulesetFD, err := landlockCreateRuleset(&attr)
	if err != nil {
		return 0, "", err
	}
	defer unix.Close(rulesetFD)
	for _, r := range p.Rules {
		if err := landlockAddRule(rulesetFD, r, attr.handledAccessFS); err != nil {
			return 0, "", err
		}
	}
	if p.ConnectTCP != 0 && attr.handledAccessNet != 0 {
		if err := landlockAllowConnect(rulesetFD, p.ConnectTCP); err != nil {
			return 0, "", err
		}
		tcp = "connect:" + strconv.Itoa(int(p.ConnectTCP))
	}

	// no_new_privs and the domain belong to one thread: both must land on
	// the thread that forks the agent.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, "", fmt.Errorf("landlock: setting no_new_privs: %w", err)
	}
	threads, err := landlockRestrictSelf(rulesetFD, abi)
	if err != nil {
		return 0, "", err
	}
	fs := "enforced"
	if p.WriteOnly {
		fs = "write-only"
	}
	return abi, fmt.Sprintf("landlock abi=%d fs=%s tcp=%s scope=%s threads=%s", abi, fs, tcp, scope, threads), nil
}

func landlockCreateRuleset(attr *landlockRulesetAttr) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(attr)), attr.size(), 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock: creating the ruleset: %w", errno)
	}
	return int(fd), nil
}

// landlockRestrictSelf enforces the ruleset on every thread of the process
// when the kernel can (TSYNC), else on the calling thread alone. A kernel
// without TSYNC refuses the unknown flag with EINVAL and nothing changes,
// so the flag is tried and dropped: the version alone is not trusted, as a
// distribution kernel may backport either way.
func landlockRestrictSelf(rulesetFD, abi int) (threads string, err error) {
	if abi >= landlockABITSync {
		_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rulesetFD), unix.LANDLOCK_RESTRICT_SELF_TSYNC, 0)
		if errno == 0 {
			return "all", nil
		}
		if errno != unix.EINVAL {
			return "", fmt.Errorf("landlock: restricting the process: %w", errno)
		}
	}
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rulesetFD), 0, 0)
	if errno != 0 {
		return "", fmt.Errorf("landlock: restricting the thread: %w", errno)
	}
	return "caller", nil
}

// landlockAddRule grants r's rights beneath r.Path, limited to what the
// ruleset handles (a right it does not handle is refused with EINVAL) and,
// for anything but a directory, to the rights a file can carry.
func landlockAddRule(rulesetFD int, r LandlockRule, handled uint64) error {
	var fd int
	var isDir bool
	var err error
	if r.Inherited != nil {
		fd, err = unix.Open(fsops.FDPath(*r.Inherited), unix.O_PATH|unix.O_CLOEXEC, 0)
		r.Path = fsops.FDPath(*r.Inherited)
	} else {
		fd, isDir, err = openLandlockPath(r.Path)
	}
	if err != nil {
		if r.Optional && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, fsops.ErrSymlink)) {
			return nil
		}
		return fmt.Errorf("landlock rule: %w", err)
	}
	defer unix.Close(fd)

	rights := landlockRuleRights(r, isDir, handled)
	if rights == 0 {
		return nil // nothing this ruleset handles (a read rule under WriteOnly)
	}

	attr := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	runtime.KeepAlive(&attr)
	if errno != 0 {
		return fmt.Errorf("landlock rule %s: %w", r.Path, errno)
	}
	return nil
}

// landlockRuleRights are the rights rule r grants beneath a directory
// (isDir) or on a file, limited to what the ruleset handles.
func landlockRuleRights(r LandlockRule, isDir bool, handled uint64) uint64 {
	rights := uint64(landlockReadRights)
	if r.Write {
		rights |= landlockWriteRights
	}
	if r.KeepDirs {
		rights &^= unix.LANDLOCK_ACCESS_FS_REMOVE_DIR
	}
	if r.Exec {
		rights |= unix.LANDLOCK_ACCESS_FS_EXECUTE
	}
	if r.Dev {
		rights |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if r.Connect {
		rights |= unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	}
	if !isDir {
		rights &= landlockFileRights
	}
	return rights & handled
}

// openLandlockPath opens path with O_PATH, never following a symlink in
// any component (DESIGN.md section 16 rule 4; fsops.OpenNoSymlinks: one
// openat2 where the kernel has it): a symlink the agent planted in a tree
// it could write in an earlier run must not move a grant elsewhere. It
// reports whether the path is a directory.
func openLandlockPath(path string) (fd int, isDir bool, err error) {
	if !filepath.IsAbs(path) {
		return -1, false, &os.PathError{Op: "open", Path: path, Err: errors.New("not an absolute path")}
	}
	fd, err = fsops.OpenNoSymlinks(filepath.Clean(path))
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			err = fsops.ErrSymlink
		}
		return -1, false, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, false, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return fd, st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}
