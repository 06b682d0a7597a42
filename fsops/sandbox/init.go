package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy/sandboxplan"
)

// Error names the step of the plan that failed. The run host turns
// it into one line and exit 69.
type Error struct {
	Step string
	Err  error
}

func (e *Error) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// RunInit is the sandbox child: it reads the plan, builds the new
// root, drops every privilege, starts the agent's program and, as pid 1 of
// the new pid namespace, reaps everything until that program exits. It
// returns the program's exit status (128+N for a signal), or 69 when the
// sandbox could not be built.
func RunInit(stderr io.Writer) int {
	// The init's signals are caught from its first moment, before it
	// reads its plan: a termination signal that comes before the program
	// starts ends the init without it, with 128+N (runAgentProgram). Only
	// one that comes while the Go runtime starts, before this line, meets
	// the runtime's default action instead (the init exits 2). Notify
	// does not wait for the runtime's signal-handling goroutine and
	// thread: they are made while the plan is read and applied, not
	// between the walls and the program's start, where every start waited
	// for them.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, initSignals...)
	// Capabilities and no_new_privs are per thread, and a child inherits
	// them from the thread that forks it: this goroutine keeps one thread,
	// drops privileges on it, and forks the agent from it.
	runtime.LockOSThread()
	// Nothing the caller left open beyond 0-2 and the descriptors ctx
	// passes on purpose may reach the agent: mark every inherited
	// descriptor close-on-exec before anything else runs.
	fsops.CloseInheritedOnExec()
	// The run's cgroup, joined by this thread alone (cgroup_thread.go).
	if err := joinRunCgroup(os.Args[1:]); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: joining the run's cgroup: %v\n", err)
		return proc.ExitUnavailable
	}
	// The runtime's pidfd check, made before a process's first process
	// start, is made on another goroutine while the plan is awaited. It
	// is waited for before the plan is applied: the check clones a child
	// that holds a copy of the descriptor table while it lives, and a file
	// of the new root open for writing in that copy would make the
	// read-only remount of its tmpfs fail (EBUSY).
	warmed := make(chan struct{})
	go func() {
		fsops.WarmProcessStart()
		close(warmed)
	}()
	plan, err := readPlan()
	<-warmed
	if err == nil {
		err = buildSandbox(plan)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: %v\n", err)
		return proc.ExitUnavailable
	}
	return runAgentProgram(plan, sigs, stderr)
}

// initSignals are the signals the init handles: termination, which it
// passes on to the run, and SIGCHLD, on which it reaps.
var initSignals = []os.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGCHLD}

// pendingTermination is the first termination signal among those caught
// so far (sigs is drained), and whether there is one: before the program
// starts, such a signal ends the init as its default action would have.
//
// A signal the kernel has delivered can still be on its way to sigs: the
// runtime's handler only queues it for a goroutine that may not have run
// yet on a busy machine. So the init first sends itself settleSignal and
// waits for it: the runtime hands queued signals on in the order it took
// them, lowest number first within one batch, and the kernel delivers
// pending ones lowest number first, so a termination signal delivered
// before the check is in sigs once settleSignal has come back.
func pendingTermination(sigs chan os.Signal) (syscall.Signal, bool) {
	settle := make(chan os.Signal, 1)
	signal.Notify(settle, settleSignal)
	if unix.Kill(os.Getpid(), settleSignal) == nil {
		<-settle
	}
	signal.Stop(settle)
	for {
		select {
		case sig := <-sigs:
			if s := sig.(syscall.Signal); s != syscall.SIGCHLD {
				return s, true
			}
		default:
			return 0, false
		}
	}
}

// settleSignal is the init's marker to itself (SIGRTMIN+2, numbered above
// every termination signal; nothing else sends it to an init).
const settleSignal = syscall.Signal(36)

func readPlan() (*sandboxplan.Plan, error) {
	f := os.NewFile(planFD, "plan")
	if f == nil {
		return nil, &Error{"reading the plan", os.ErrInvalid}
	}
	if err := receiveHandoff(planFD); err != nil {
		f.Close()
		return nil, &Error{"receiving the run's descriptors", err}
	}
	rd := bufio.NewReaderSize(f, 32<<10)
	plan, err := decodePlan(rd)
	if err != nil {
		f.Close()
		return nil, &Error{"reading the plan", err}
	}
	// The release byte comes after the plan, on the same channel (it may
	// be in the reader's buffer already).
	planRest, planFile = rd, f
	if err := plan.Validate(); err != nil {
		return nil, &Error{"checking the plan", err}
	}
	if (plan.IDMap != nil) != (idmappedWorkspace != nil) {
		return nil, &Error{"receiving the idmapped workspace", fmt.Errorf("the plan and the descriptors handed over disagree")}
	}
	if templateTree != nil && (plan.RootFS || !plan.HasTemplate()) {
		return nil, &Error{"receiving the template", fmt.Errorf("the plan has no template part")}
	}
	return plan, nil
}

// Descriptors the run host handed over with the plan (see the handoff
// bits); nil when not handed over.
var (
	runFile       *os.File // the run capability, passed on to the program as RunFD
	brokerChannel *os.File // the init's end of the broker's order channel
	templateTree  *os.File // a copy of the kept template's tree (ctx/fsops/kept)
)

// receiveHandoff receives the handoff byte and the descriptors attached
// to it. A descriptor of a kind the byte does not name, or one missing,
// is an error: the init acts on nothing it cannot account for.
func receiveHandoff(fd int) error {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(handoffBits*4))
	var n, oobn, flags int
	var err error
	for {
		n, oobn, flags, _, err = unix.Recvmsg(fd, b[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return err
	}
	var fds []int
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if n != 1 {
		closeAll()
		return io.ErrUnexpectedEOF
	}
	var want int
	for bit := 0; bit < handoffBits; bit++ {
		if b[0]&(1<<bit) != 0 {
			want++
		}
	}
	// MSG_CTRUNC: more descriptors came than there was room for, and the
	// kernel closed the rest.
	if b[0]>>handoffBits != 0 || len(fds) != want || flags&unix.MSG_CTRUNC != 0 {
		closeAll()
		return fmt.Errorf("handoff %#x with %d descriptors", b[0], len(fds))
	}
	next := func() *os.File {
		f := os.NewFile(uintptr(fds[0]), "handed over")
		fds = fds[1:]
		return f
	}
	if b[0]&handoffRun != 0 {
		runFile = next()
	}
	if b[0]&handoffIDMap != 0 {
		idmappedWorkspace = next()
	}
	if b[0]&handoffBroker != 0 {
		brokerChannel = next()
	}
	if b[0]&handoffNet != 0 {
		netChannel = next()
	}
	if b[0]&handoffTemplate != 0 {
		templateTree = next()
	}
	return nil
}

func buildSandbox(plan *sandboxplan.Plan) error {
	if plan.Namespaces.Mount {
		if err := applyMounts(plan); err != nil {
			return err
		}
	}
	// In the namespace, its loopback up, before the privileges go (the
	// ports below 1024 need CAP_NET_BIND_SERVICE).
	if err := listenEgress(plan); err != nil {
		return err
	}
	if plan.Namespaces.UTS && plan.Hostname != "" {
		if err := unix.Sethostname([]byte(plan.Hostname)); err != nil {
			return &Error{"setting the hostname", err}
		}
	}
	return dropPrivileges(plan.Namespaces.User)
}

// applyMounts builds the new root under plan.NewRoot and pivots into it.
// With a template tree handed over (templateTree), the tree is the new
// root and the ops it holds are skipped.
func applyMounts(plan *sandboxplan.Plan) error {
	// First, and fatal if it fails: nothing we mount may propagate back to
	// the host's mount namespace.
	if err := makeMountsPrivate(plan.NewRoot); err != nil {
		return &Error{"making all mounts private", err}
	}
	tree := templateTree
	templateTree = nil
	if tree != nil {
		defer tree.Close()
	}
	if err := EnterNewRoot(plan, tree); err != nil {
		return err
	}
	pivoted := false
	for _, op := range plan.Ops {
		if tree != nil && op.Template {
			continue
		}
		base := "."
		if pivoted {
			base = "/"
		}
		if err := ApplyOp(base, op); err != nil {
			step := string(op.Kind) + " " + op.Target
			if op.Why != "" {
				step = op.Why + ": " + step
			}
			return &Error{step, err}
		}
		if op.Kind == sandboxplan.OpPivotRoot {
			pivoted = true
		}
	}
	return nil
}

// EnterNewRoot mounts the new root on plan.NewRoot (the agent's root
// filesystem bound, a fresh tmpfs, or tree attached), through a descriptor
// opened without following any symlink, and enters it: no op before the
// pivot walks the host's path to it again (a large share of building the
// sandbox, when each op did).
func EnterNewRoot(plan *sandboxplan.Plan, tree *os.File) error {
	root := plan.NewRoot
	rootFD, err := fsops.OpenNoSymlinks(root)
	if err != nil {
		return &Error{"opening the new root " + root, err}
	}
	defer unix.Close(rootFD)
	switch {
	case tree != nil:
		if err := unix.MoveMount(int(tree.Fd()), "", rootFD, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
			return &Error{"attaching the template on the new root " + root, err}
		}
	case plan.RootFS:
		if err := unix.Mount(fsops.FDPath(rootFD), root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return &Error{"binding the agent's root filesystem " + root, err}
		}
		if err := remount(root, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
			return &Error{"making the agent's root filesystem nosuid,nodev " + root, err}
		}
	default:
		if err := unix.Mount("tmpfs", fsops.FDPath(rootFD), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
			return &Error{"mounting the new root tmpfs on " + root, err}
		}
	}
	top, err := openMountOver(root, rootFD)
	if err != nil {
		return &Error{"checking the new root " + root, err}
	}
	err = unix.Fchdir(top)
	unix.Close(top)
	if err != nil {
		return &Error{"entering the new root " + root, err}
	}
	return nil
}

// dropPrivileges empties the capability bounding set and the ambient set
// and sets no_new_privs. With an empty bounding set no later execve can
// grant a capability, not even to uid 0; with no_new_privs, setuid bits and
// file capabilities are ignored. Both are per-thread, and a child inherits
// them from the thread that forks it: RunInit keeps its goroutine on
// one locked thread, drops them there, and forks the agent from it. (The
// runtime's other threads never fork the agent.)
//
// ownUserns says the init made a user namespace of its own (iso userns),
// where it holds every capability and a refused drop is an error.
func dropPrivileges(ownUserns bool) error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if err == unix.EPERM && os.Geteuid() != 0 && !ownUserns {
			// iso landlock run by a user (on the host, or inside a
			// container's user namespace): no capability to drop the
			// set with, and none to gain either (no_new_privs below).
			break
		}
		if err != nil && err != unix.EINVAL {
			return &Error{"dropping capability " + strconv.Itoa(c) + " from the bounding set", err}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return &Error{"clearing ambient capabilities", err}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return &Error{"setting no_new_privs", err}
	}
	// The init holds the broker's order channel and the run's setup
	// descriptors: not dumpable, so its /proc/1/fd, mem and environ belong
	// to root and no agent process can reach them, whatever its uid. (The
	// agent's program is dumpable again after its execve.)
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return &Error{"making the init not dumpable", err}
	}
	// An empty bounding set does not limit the inheritable set, and an
	// execve by uid 0 turns inheritable capabilities into permitted ones:
	// the inheritable set (which raising ambient capabilities filled) must
	// be emptied too. Effective and permitted stay on this thread for now:
	// the fork may still need CAP_SETUID to take the agent's uid.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return &Error{"reading capabilities", err}
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return &Error{"clearing inheritable capabilities", err}
	}
	return nil
}

// planRest is what follows the plan on its channel: the run host's release
// byte (Sandbox.Release); planFile the channel itself, which carries the
// end report back (reportEnd).
var (
	planRest io.Reader
	planFile *os.File
)

// awaitRelease waits for the run host to let the program start (once the
// init is in the run's cgroup): its release byte, or the end of the channel
// when the host went away or never released.
func awaitRelease() error {
	if planRest == nil {
		return nil
	}
	var b [1]byte
	if _, err := io.ReadFull(planRest, b[:]); err != nil || b[0] != releaseByte {
		planFile.Close()
		return &Error{"waiting for the run host's release", fmt.Errorf("the run host did not release the sandbox (%v)", err)}
	}
	return nil
}

// reportEnd tells the run host the program's status once every process
// of the run has ended, on the plan channel (Sandbox.Ended): the host
// records the end while the kernel tears the sandbox down. The channel
// is closed either way.
func reportEnd(status int) {
	if planFile == nil {
		return
	}
	fmt.Fprintf(planFile, "%s%d\n", endReport, status)
	planFile.Close()
	planFile = nil
}

// openMountOver opens path without following a symlink and checks that
// it is not the directory fd was opened on but a mount made over it; it
// returns the descriptor of what path leads to.
func openMountOver(path string, fd int) (int, error) {
	now, err := fsops.OpenNoSymlinks(path)
	if err != nil {
		return -1, err
	}
	var under, over unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &under); err != nil {
		unix.Close(now)
		return -1, err
	}
	if err := unix.Statx(now, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &over); err != nil {
		unix.Close(now)
		return -1, err
	}
	if under.Mask&unix.STATX_MNT_ID == 0 {
		return now, nil // a kernel before 5.8 does not say; the mount was made through fd
	}
	if under.Mnt_id == over.Mnt_id {
		unix.Close(now)
		return -1, errors.New("the path does not lead to the mount just made")
	}
	return now, nil
}
