package fsops

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops/proc"
	"ctx/policy"
)

// SandboxError names the step of the plan that failed. The run host turns
// it into one line and exit 69.
type SandboxError struct {
	Step string
	Err  error
}

func (e *SandboxError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *SandboxError) Unwrap() error { return e.Err }

// RunSandboxInit is the sandbox child: it reads the plan, builds the new
// root, drops every privilege, starts the agent's program and, as pid 1 of
// the new pid namespace, reaps everything until that program exits. It
// returns the program's exit status (128+N for a signal), or 69 when the
// sandbox could not be built.
func RunSandboxInit(stderr io.Writer) int {
	// Capabilities and no_new_privs are per thread, and a child inherits
	// them from the thread that forks it: this goroutine keeps one thread,
	// drops privileges on it, and forks the agent from it.
	runtime.LockOSThread()
	// Nothing the caller left open beyond 0-2 and the descriptors ctx
	// passes on purpose may reach the agent: mark every inherited
	// descriptor close-on-exec before anything else runs.
	CloseInheritedOnExec()
	plan, err := readPlan()
	if err == nil {
		err = buildSandbox(plan)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: %v\n", err)
		return 69
	}
	return runAgentProgram(plan, stderr)
}

func readPlan() (*policy.Plan, error) {
	f := os.NewFile(planFD, "plan")
	if f == nil {
		return nil, &SandboxError{"reading the plan", os.ErrInvalid}
	}
	var plan policy.Plan
	dec := json.NewDecoder(io.LimitReader(f, 64<<20))
	if err := dec.Decode(&plan); err != nil {
		f.Close()
		return nil, &SandboxError{"reading the plan", err}
	}
	// The release byte comes after the plan, on the same pipe (it may be
	// in the decoder's buffer already).
	planRest, planFile = io.MultiReader(dec.Buffered(), f), f
	if err := plan.Validate(); err != nil {
		return nil, &SandboxError{"checking the plan", err}
	}
	if plan.IDMap != nil {
		idmappedWorkspace = os.NewFile(idmapFD, "idmapped workspace")
		if _, err := idmappedWorkspace.Stat(); err != nil {
			return nil, &SandboxError{"receiving the idmapped workspace", err}
		}
	}
	return &plan, nil
}

func buildSandbox(plan *policy.Plan) error {
	if plan.Namespaces.Mount {
		if err := applyMounts(plan); err != nil {
			return err
		}
	}
	if plan.Namespaces.UTS && plan.Hostname != "" {
		if err := unix.Sethostname([]byte(plan.Hostname)); err != nil {
			return &SandboxError{"setting the hostname", err}
		}
	}
	return dropPrivileges()
}

// applyMounts builds the new root under plan.NewRoot and pivots into it.
func applyMounts(plan *policy.Plan) error {
	// First, and fatal if it fails: nothing we mount may propagate back to
	// the host's mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return &SandboxError{"making all mounts private", err}
	}
	root := plan.NewRoot
	// The new root is mounted on the directory checked, through a
	// descriptor opened without following any symlink.
	rootFD, err := OpenNoSymlinks(root)
	if err != nil {
		return &SandboxError{"opening the new root " + root, err}
	}
	defer unix.Close(rootFD)
	if plan.RootFS {
		if err := unix.Mount(fdPath(rootFD), root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return &SandboxError{"binding the agent's root filesystem " + root, err}
		}
		if err := remount(root, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
			return &SandboxError{"making the agent's root filesystem nosuid,nodev " + root, err}
		}
	} else if err := unix.Mount("tmpfs", fdPath(rootFD), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
		return &SandboxError{"mounting the new root tmpfs on " + root, err}
	}
	top, err := openMountOver(root, rootFD)
	if err != nil {
		return &SandboxError{"checking the new root " + root, err}
	}
	// Every op before the pivot works relative to the new root, entered
	// through the descriptor just checked: no op walks the host's path
	// to it again (about 500 lookups of a long path per start before, a
	// sixth of building the sandbox).
	err = unix.Fchdir(top)
	unix.Close(top)
	if err != nil {
		return &SandboxError{"entering the new root " + root, err}
	}
	pivoted := false
	for _, op := range plan.Ops {
		base := "."
		if pivoted {
			base = "/"
		}
		if err := applyOp(base, op); err != nil {
			step := string(op.Kind) + " " + op.Target
			if op.Why != "" {
				step = op.Why + ": " + step
			}
			return &SandboxError{step, err}
		}
		if op.Kind == policy.OpPivotRoot {
			pivoted = true
		}
	}
	return nil
}

// Statfs flags (statvfs ST_*), which x/sys does not name.
const (
	stRdonly     = 0x1
	stNosuid     = 0x2
	stNodev      = 0x4
	stNoexec     = 0x8
	stNoatime    = 0x400
	stNodiratime = 0x800
	stRelatime   = 0x1000
)

func applyOp(base string, op policy.Op) error {
	switch op.Kind {
	case policy.OpPivotRoot:
		return pivotRoot(base)
	case policy.OpLoopback:
		return loopbackUp()
	}
	target, err := safeJoin(base, op.Target)
	if err != nil {
		return err
	}
	mode := os.FileMode(op.Mode)
	switch op.Kind {
	case policy.OpDir:
		return mkdirAll(base, op.Target, orMode(mode, 0o755))
	case policy.OpFile:
		if err := mkdirAll(base, filepath.Dir(op.Target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, op.Data, orMode(mode, 0o644))
	case policy.OpSymlink:
		if err := mkdirAll(base, filepath.Dir(op.Target), 0o755); err != nil {
			return err
		}
		return os.Symlink(op.Source, target)
	case policy.OpTmpfs:
		if err := mkdirAll(base, op.Target, 0o755); err != nil {
			return err
		}
		opts := "mode=" + strconv.FormatUint(uint64(orMode(mode, 0o755)), 8)
		if op.Size != "" {
			opts += ",size=" + op.Size
		}
		flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
		if op.NoExec {
			flags |= unix.MS_NOEXEC
		}
		if err := unix.Mount("tmpfs", target, "tmpfs", flags, opts); err != nil {
			return err
		}
		return fillTmpfs(target, op.Fill)
	case policy.OpProc:
		if err := mkdirAll(base, op.Target, 0o555); err != nil {
			return err
		}
		return unix.Mount("proc", target, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	case policy.OpDevpts:
		if err := mkdirAll(base, op.Target, 0o755); err != nil {
			return err
		}
		return unix.Mount("devpts", target, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	case policy.OpBind:
		return bindMount(base, op, target)
	case policy.OpMask:
		st, err := os.Lstat(target)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.IsDir() {
			if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=4k"); err != nil {
				return err
			}
			return remount(target, unix.MS_RDONLY)
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return nil // a symlink into a masked or read-only place; nothing to read through it
		}
		if err := unix.Mount("/dev/null", target, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		return remount(target, unix.MS_RDONLY)
	case policy.OpReadOnly:
		return remount(target, unix.MS_RDONLY)
	case policy.OpProtectPath:
		return protectInPlace(target)
	case policy.OpProtect:
		// A part of a filesystem the plan mounted (/proc/sys): bound onto
		// itself, then that bind made read-only.
		if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err := unix.Mount(target, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		return remount(target, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC)
	}
	return fmt.Errorf("unknown op %q", op.Kind)
}

func orMode(m, def os.FileMode) os.FileMode {
	if m == 0 {
		return def
	}
	return m
}

// bindMount binds op.Source at target. The source is opened without
// following a symlink in any component and the bind is made from that
// descriptor, so the object checked is the object mounted: an agent that
// turned a source (its skills, a shared directory, a --mount path) into a
// symlink between runs gets a refusal, never the symlink's target.
func bindMount(base string, op policy.Op, target string) error {
	if op.IDMap && idmappedWorkspace != nil {
		return attachIDMapped(base, op, target)
	}
	srcFD, err := OpenNoSymlinks(op.Source)
	if err != nil {
		if op.Optional && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("source %s: %w", op.Source, explainNoSymlinks(err))
	}
	defer unix.Close(srcFD)
	var st unix.Stat_t
	if err := unix.Fstat(srcFD, &st); err != nil {
		return fmt.Errorf("source %s: %w", op.Source, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := mkdirAll(base, op.Target, 0o755); err != nil {
			return err
		}
	} else {
		if err := mkdirAll(base, filepath.Dir(op.Target), 0o755); err != nil {
			return err
		}
		// The mount point: made unless there is one (the /mnt skeleton
		// is read-only and has its own).
		if st, err := os.Lstat(target); err != nil || !st.Mode().IsRegular() {
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|unix.O_NOFOLLOW, 0o644)
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if f != nil {
				f.Close()
			}
		}
	}
	if done, err := attachBind(srcFD, op, target); done {
		return err
	}
	flags := uintptr(unix.MS_BIND)
	if op.Recursive {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(fdPath(srcFD), target, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s: %w", op.Source, err)
	}
	return restrictBind(op, target)
}

// attachBind binds srcFD at target with the new mount API: a detached copy
// of the source (open_tree), given the op's flags (mount_setattr, on every
// mount of an rbind at once: AT_RECURSIVE), then attached (move_mount). The
// old way remounted each mount, the statfs before each remount keeping
// flags the kernel locks, and an rbind reread the whole mount table to find
// its submounts: with about 50 binds per sandbox that was the largest part
// of building it. mount_setattr only adds flags, so locked ones stay by
// themselves. done is false when the kernel has no such calls (before
// 5.12): then mount(2) does it.
func attachBind(srcFD int, op policy.Op, target string) (done bool, err error) {
	how := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_EMPTY_PATH)
	at := uint(unix.AT_EMPTY_PATH)
	if op.Recursive {
		how |= unix.AT_RECURSIVE
		at |= unix.AT_RECURSIVE
	}
	tree, err := unix.OpenTree(srcFD, "", how)
	if err == unix.ENOSYS {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("bind %s: %w", op.Source, err)
	}
	defer unix.Close(tree)
	if attrs := MountAttrs(op); attrs != 0 {
		err := unix.MountSetattr(tree, "", at, &unix.MountAttr{Attr_set: attrs})
		if err == unix.ENOSYS {
			return false, nil
		}
		if err != nil {
			return true, fmt.Errorf("bind %s: setting its flags: %w", op.Source, err)
		}
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return true, fmt.Errorf("bind %s: %w", op.Source, err)
	}
	return true, nil
}

// restrictBind adds the op's ro, nosuid, nodev and noexec to the bind at
// target and, for an rbind, to every submount under it.
func restrictBind(op policy.Op, target string) error {
	want := msFlags(op)
	if want == 0 {
		return nil
	}
	if err := remount(target, want); err != nil {
		return err
	}
	if op.Recursive {
		// A read-only (or nosuid...) rbind must not leave its submounts
		// writable: remount each of them the same way.
		subs, err := submounts(target)
		if err != nil {
			return err
		}
		for _, s := range subs {
			if err := remount(s, want); err != nil {
				return fmt.Errorf("remounting submount %s: %w", s, err)
			}
		}
	}
	return nil
}

// remount adds flags to the bind mount at target, keeping the flags the
// mount already has: inside a user namespace the kernel refuses to clear
// flags that were locked on the original mount (nosuid, nodev, ro...).
func remount(target string, flags uintptr) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		return err
	}
	for _, m := range []struct {
		st int64
		ms uintptr
	}{{stRdonly, unix.MS_RDONLY}, {stNosuid, unix.MS_NOSUID}, {stNodev, unix.MS_NODEV}, {stNoexec, unix.MS_NOEXEC},
		{stNoatime, unix.MS_NOATIME}, {stNodiratime, unix.MS_NODIRATIME}, {stRelatime, unix.MS_RELATIME}} {
		if int64(sfs.Flags)&m.st != 0 {
			flags |= m.ms
		}
	}
	return unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|flags, "")
}

// submounts lists the mount points strictly below dir.
func submounts(dir string) ([]string, error) {
	table, err := MountTable()
	var out []string
	for _, m := range table {
		if strings.HasPrefix(m.Target, dir+"/") {
			out = append(out, m.Target)
		}
	}
	return out, err
}

// safeJoin joins rel (absolute inside the sandbox) under base and refuses a
// path that goes through a symlink: mount targets are resolved by the
// kernel, and a symlink in a caller's directory must not redirect a mount.
func safeJoin(base, rel string) (string, error) {
	cur := base
	for _, c := range strings.Split(strings.Trim(rel, "/"), "/") {
		if c == "" {
			continue
		}
		if c == "." || c == ".." {
			return "", fmt.Errorf("%q: %q component", rel, c)
		}
		cur = filepath.Join(cur, c)
		st, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink != 0 && cur != filepath.Join(base, rel) {
			return "", fmt.Errorf("%s: a symlink on the way to a mount target", rel)
		}
	}
	return filepath.Join(base, rel), nil
}

// mkdirAll creates rel under base, refusing symlinks on the way.
func mkdirAll(base, rel string, mode os.FileMode) error {
	cur := base
	for _, c := range strings.Split(strings.Trim(rel, "/"), "/") {
		if c == "" {
			continue
		}
		cur = filepath.Join(cur, c)
		st, err := os.Lstat(cur)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s: exists and is not a directory", rel)
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Mkdir(cur, mode); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// pivotRoot makes newRoot the root and detaches the old one. pivot_root(".",
// ".") stacks the old root on top of the new one at "/"; unmounting "." then
// removes exactly the old root, with no put_old directory needed.
func pivotRoot(newRoot string) error {
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return err
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return err
	}
	return unix.Chdir("/")
}

// loopbackUp brings lo up in a new network namespace, so local servers work
// without any route to the outside.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropPrivileges empties the capability bounding set and the ambient set
// and sets no_new_privs. With an empty bounding set no later execve can
// grant a capability, not even to uid 0; with no_new_privs, setuid bits and
// file capabilities are ignored. Both are per-thread, and a child inherits
// them from the thread that forks it: RunSandboxInit keeps its goroutine on
// one locked thread, drops them there, and forks the agent from it. (The
// runtime's other threads never fork the agent.)
func dropPrivileges() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if err == unix.EPERM && os.Geteuid() != 0 && !inUserNamespace() {
			// iso landlock run by a user: no capability to drop the set
			// with, and none to gain either (no_new_privs below).
			break
		}
		if err != nil && err != unix.EINVAL {
			return &SandboxError{"dropping capability " + strconv.Itoa(c) + " from the bounding set", err}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return &SandboxError{"clearing ambient capabilities", err}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return &SandboxError{"setting no_new_privs", err}
	}
	// The init holds the broker's order channel and the run's setup
	// descriptors: not dumpable, so its /proc/1/fd, mem and environ belong
	// to root and no agent process can reach them, whatever its uid. (The
	// agent's program is dumpable again after its execve.)
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return &SandboxError{"making the init not dumpable", err}
	}
	// An empty bounding set does not limit the inheritable set, and an
	// execve by uid 0 turns inheritable capabilities into permitted ones:
	// the inheritable set (which raising ambient capabilities filled) must
	// be emptied too. Effective and permitted stay on this thread for now:
	// the fork may still need CAP_SETUID to take the agent's uid.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return &SandboxError{"reading capabilities", err}
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return &SandboxError{"clearing inheritable capabilities", err}
	}
	return nil
}

// planRest is what follows the plan on its pipe: the run host's release
// byte (Sandbox.Release); planFile the pipe itself.
var (
	planRest io.Reader
	planFile *os.File
)

// awaitRelease waits for the run host to let the program start (once the
// init is in the run's cgroup): its release byte, or the end of the pipe
// when the host went away or never released.
func awaitRelease() error {
	if planRest == nil {
		return nil
	}
	defer planFile.Close()
	var b [1]byte
	if _, err := io.ReadFull(planRest, b[:]); err != nil || b[0] != releaseByte {
		return &SandboxError{"waiting for the run host's release", fmt.Errorf("the run host did not release the sandbox (%v)", err)}
	}
	return nil
}

// runAgentProgram starts the agent's program with its identity and
// environment and waits as init: it reaps every process of the namespace,
// forwards termination signals, and when the program exits, everything
// else in the sandbox goes with it.
func runAgentProgram(plan *policy.Plan, stderr io.Writer) int {
	exe := plan.Exe
	if exe == "" {
		exe = plan.Argv[0]
		if !strings.Contains(exe, "/") {
			exe = agentPath(exe, plan.Env)
		}
	}
	if err := applyLimits(plan.Limits); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: %v\n", err)
		return 69
	}
	if err := applyWalls(plan, exe); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: %v\n", err)
		return 69
	}
	if err := awaitRelease(); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: %v\n", err)
		return 69
	}
	cmd := &exec.Cmd{Path: exe, Args: plan.Argv, Env: plan.Env, Dir: plan.Cwd,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	// The run capability, only in a run that hands it on (one without a
	// broker: CTX_RUN_FD in the plan's environment); in any other run
	// descriptor 3 is not passed, whatever the init has there.
	if hasEnv(plan.Env, "CTX_RUN_FD="+strconv.Itoa(RunFD)) {
		if run := os.NewFile(RunFD, "run"); run != nil {
			if _, err := run.Stat(); err == nil {
				cmd.ExtraFiles = []*os.File{run}
			}
		}
	}
	// In a user namespace init already runs as the agent's uid and gid (the
	// namespace maps them onto the caller's). In uid mode init is real root
	// and the program gets the agent's ids. Either way the bounding set is
	// empty and no_new_privs is set, so execve grants no capability.
	if cred := agentCredential(plan); cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}

	if !plan.Namespaces.PID {
		// No pid namespace to hold the run (iso landlock): the init is
		// its subreaper, so whatever leaves the program's session or
		// double-forks still comes back to it, and ends with the run.
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGCHLD)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: starting %s: %v\n", plan.Argv[0], err)
		if errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	child := cmd.Process.Pid
	broker := newInitBroker(plan)
	orders := broker.deliveries()
	status := -1
	// The run ends when its program has, and every program that joined
	// it since (a second ctx agent start, a second MCP client) too.
	for status < 0 || broker.holding() {
		select {
		case d, ok := <-orders:
			if !ok {
				orders = nil // the host closed the channel; no more calls
				continue
			}
			// On this, the locked thread: the tool inherits the walls.
			broker.handle(d)
		case sig := <-sigs:
			switch sig {
			case syscall.SIGCHLD:
				if st := reap(child, broker); st >= 0 {
					status = st
				}
			case syscall.SIGTERM, syscall.SIGHUP:
				// Pass termination on to every process of the sandbox.
				signalRun(plan, sig.(syscall.Signal))
			default:
				// SIGINT and SIGQUIT from the terminal reach the
				// foreground group by themselves; init only must not die
				// of them.
			}
		}
	}
	// The program is gone: so is everything it left behind.
	signalRun(plan, syscall.SIGKILL)
	if plan.Namespaces.PID {
		for {
			if _, err := syscall.Wait4(-1, nil, 0, nil); err == syscall.ECHILD {
				break
			}
		}
		return status
	}
	// Without a pid namespace a process may fork between the scan and the
	// kill: kill and reap in rounds until no child is left (bounded).
	for round := 0; round < 200; round++ {
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if err == syscall.ECHILD {
				return status
			}
			if pid <= 0 {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
		signalRun(plan, syscall.SIGKILL)
	}
	return status
}

// agentCredential is who the program and every brokered tool run as when
// the init must switch to it: in uid mode, and in iso landlock run by root
// (a user's landlock run is the user; a user namespace maps the agent by
// itself).
func agentCredential(plan *policy.Plan) *syscall.Credential {
	switch {
	case plan.Iso == "uid", plan.Iso == string(policy.IsoLandlock) && os.Geteuid() == 0 && plan.UID != 0:
		return &syscall.Credential{Uid: plan.UID, Gid: plan.GID, Groups: plan.Groups}
	}
	return nil
}

// signalRun sends sig to every process of the run. With a pid namespace
// that is kill(-1): everything but the init. Without one (iso landlock)
// kill(-1) would reach the whole host: the init is the run's subreaper
// instead, and signals exactly its own descendants.
func signalRun(plan *policy.Plan, sig syscall.Signal) {
	if plan.Namespaces.PID {
		syscall.Kill(-1, sig)
		return
	}
	table := proc.ScanParents()
	seen := map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		for _, c := range table[pid] {
			if !seen[c] {
				seen[c] = true
				syscall.Kill(c, sig)
				walk(c)
			}
		}
	}
	walk(os.Getpid())
}

// inUserNamespace reports whether this process runs in a user namespace
// other than the initial one.
func inUserNamespace() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return !(len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295")
}

// reap collects every exited child without blocking, reports the tool
// processes the broker started, and returns the exit status of child once
// it is among them, else -1.
func reap(child int, broker *initBroker) int {
	status := -1
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return status
		}
		code := proc.StatusCode(ws)
		if pid == child {
			status = code
		} else {
			broker.exited(pid, code)
		}
	}
}

// agentPath finds name in the PATH of the agent's environment (the init's
// own environment is not the agent's), or returns it unchanged when it is
// not found, for the exec to fail on it with ENOENT.
func agentPath(name string, env []string) string {
	if p, err := proc.LookPath(name, proc.EnvPath(env, "/usr/bin:/bin")); err == nil {
		return p
	}
	return name
}

// hasEnv reports whether env holds the entry kv exactly.
func hasEnv(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}
