package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/policy/sandboxplan"
)

// UsernsHoldApplet is the hidden applet that holds a user namespace open
// while the host takes a descriptor of it: it waits for EOF on stdin.
const UsernsHoldApplet = "ctx-userns-hold"

// RunUsernsHold is that applet.
func RunUsernsHold() int {
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// idmappedWorkspace is, in the sandbox child, the detached idmapped tree
// the host prepared for the workspace bind.
var idmappedWorkspace *os.File

// IDMapping says which on-disk owner an idmapped mount shows as the agent.
type IDMapping struct {
	DiskUID, DiskGID uint32 // the owner on disk (the workspace's owner)
	UID, GID         uint32 // who the agent is
}

// IDMappedTree makes a detached clone of dir (opened without following
// symlinks) whose files owned by m.DiskUID/m.DiskGID appear owned by the
// agent's m.UID/m.GID, and whose files the agent creates are stored as
// m.DiskUID/m.DiskGID: in uid mode the agent works in a root caller's
// workspace as itself, and the caller finds its own files afterwards.
// attrs are MOUNT_ATTR_* flags (read-only, nosuid...). It needs root, a
// kernel with idmapped mounts (5.12) and a filesystem that supports them;
// the user namespace of the mapping is kept in the runtime directory
// runtime for the next tree ("": not kept; see pinnedUserns);
// the error says which step failed so the caller can fall back to a plain
// bind and report why.
func IDMappedTree(dir string, m IDMapping, attrs uint64, runtime string) (*os.File, error) {
	src, err := fsops.OpenNoSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, fsops.ExplainNoSymlinks(err))
	}
	defer unix.Close(src)
	userns, err := pinnedUserns(runtime, m)
	if err != nil {
		return nil, fmt.Errorf("user namespace for the idmap: %w", err)
	}
	defer userns.Close()
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, fmt.Errorf("open_tree %s: %w", dir, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | attrs, Userns_fd: uint64(userns.Fd())}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(tree)
		return nil, fmt.Errorf("idmapping %s: %w", dir, err)
	}
	return os.NewFile(uintptr(tree), "idmapped "+dir), nil
}

// opFlags are an op's mount flags, as mount(2) and mount_setattr(2)
// spell them.
var opFlags = []struct {
	set  func(sandboxplan.Op) bool
	ms   uintptr
	attr uint64
}{
	{func(o sandboxplan.Op) bool { return o.ReadOnly }, unix.MS_RDONLY, unix.MOUNT_ATTR_RDONLY},
	{func(o sandboxplan.Op) bool { return o.NoSuid }, unix.MS_NOSUID, unix.MOUNT_ATTR_NOSUID},
	{func(o sandboxplan.Op) bool { return o.NoDev }, unix.MS_NODEV, unix.MOUNT_ATTR_NODEV},
	{func(o sandboxplan.Op) bool { return o.NoExec }, unix.MS_NOEXEC, unix.MOUNT_ATTR_NOEXEC},
}

// MountAttrs turns an op's flags into MOUNT_ATTR_* flags.
func MountAttrs(op sandboxplan.Op) uint64 {
	var a uint64
	for _, f := range opFlags {
		if f.set(op) {
			a |= f.attr
		}
	}
	return a
}

// msFlags turns an op's flags into MS_* flags.
func msFlags(op sandboxplan.Op) uintptr {
	var m uintptr
	for _, f := range opFlags {
		if f.set(op) {
			m |= f.ms
		}
	}
	return m
}

// mappedUserns returns a descriptor of a new user namespace mapping
// m.DiskUID (inside) onto m.UID (outside), and the same for gids: for an
// idmapped mount, that presents on-disk DiskUID as the agent. A process
// holds the namespace while its descriptor is taken.
func mappedUserns(m IDMapping) (*os.File, error) {
	self, err := fsops.Executable()
	if err != nil {
		return nil, err
	}
	// The holder is traced, so the kernel stops it at its first
	// instruction after the exec (SIGTRAP), where it is killed once its
	// namespace is held: its Go runtime never starts, which on this
	// start's critical path cost more than the rest of the idmap. Where
	// tracing is refused (Yama ptrace_scope 3, a seccomp filter), it
	// starts untraced and is killed as soon as that allows.
	ns, err := holdUserns(self, m, true)
	if err != nil {
		ns, err = holdUserns(self, m, false)
	}
	return ns, err
}

// holdUserns starts the holder in a new user namespace with m's maps,
// opens that namespace and kills the holder.
func holdUserns(self string, m IDMapping, traced bool) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	cmd := &exec.Cmd{Path: self, Args: []string{UsernsHoldApplet}, Stdin: r, Env: []string{}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: int(m.DiskUID), HostID: int(m.UID), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: int(m.DiskGID), HostID: int(m.GID), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
		Ptrace:      traced,
	}
	if traced {
		// The tracer is the thread that forks: it must not end before
		// the holder is killed, or the holder would run on untraced.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	err = cmd.Start()
	r.Close()
	if err != nil {
		return nil, err
	}
	ns, err := os.Open(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "ns", "user"))
	cmd.Process.Kill()
	w.Close()
	cmd.Wait()
	return ns, err
}

// attachIDMapped moves the host's idmapped workspace tree onto target.
// Its flags were set when it was made.
func attachIDMapped(base string, op sandboxplan.Op) error {
	pfd, name, err := MountPoint(base, op.Target, true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	tree := idmappedWorkspace
	idmappedWorkspace = nil
	defer tree.Close()
	if err := unix.MoveMount(int(tree.Fd()), "", pfd, name, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attaching the idmapped %s: %w", op.Source, err)
	}
	return nil
}
