package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/policy"
)

// ProbeIsolation finds out what this host lets the caller build, for
// policy.ChooseIso: it starts a short-lived child of this binary in the
// namespaces a sandbox needs (a user and a mount namespace for a user, a
// mount and a pid namespace for root), checks whether / is a mount point
// (in a chroot it is not, and pivot_root needs one), and asks for the
// Landlock ABI. With full false only the cheap checks run and the
// namespaces are taken to work (an explicit mode then fails, clearly, at
// the start itself).
func ProbeIsolation(full bool) policy.HostIsolation {
	h := policy.HostIsolation{Userns: true, MountNS: true, RootIsMount: RootIsMountPoint()}
	h.Landlock, _ = LandlockABI()
	if abi, err := LandlockABI(); abi == 0 && err != nil {
		h.LandlockWhy = err.Error()
	}
	if !full {
		return h
	}
	if os.Geteuid() == 0 {
		if err := probeUnshare(syscall.CLONE_NEWNS | syscall.CLONE_NEWPID); err != nil {
			h.MountNS, h.MountNSWhy = false, err.Error()
		}
	} else if err := probeClone(syscall.CLONE_NEWUSER|syscall.CLONE_NEWNS|syscall.CLONE_NEWPID, true); err != nil {
		h.Userns, h.UsernsWhy = false, err.Error()
	}
	return h
}

// ProbeAhead starts ProbeIsolation(true) on another goroutine, for a
// caller that will probably need it shortly, and returns what answers
// instead of ProbeIsolation: the full probe's result when full, else the
// cheap checks, made then. Only root's probe is started ahead: it is an
// unshare on a thread of its own (a cost on the start's path, which this
// overlaps with loading the agent), where a user's would start a process
// it may not need.
//
// Either answer waits for the probe: its thread ends with it, and a
// thread that ends sends the parent-death signal to every process forked
// on it. The Go runtime may have run another goroutine on that thread
// before the probe's took it, so a process started with Pdeathsig before
// the probe has ended (the run host's sandbox init) could be killed by
// it; the caller asks before it starts any.
func ProbeAhead() func(full bool) policy.HostIsolation {
	if os.Geteuid() != 0 {
		return ProbeIsolation
	}
	ahead := make(chan policy.HostIsolation, 1)
	go func() { ahead <- probeAheadRun() }()
	result := sync.OnceValue(func() policy.HostIsolation { return <-ahead })
	return func(full bool) policy.HostIsolation {
		answer := result()
		if !full {
			return ProbeIsolation(false)
		}
		return answer
	}
}

// probeAheadRun is the probe ProbeAhead starts (a test delays it).
var probeAheadRun = func() policy.HostIsolation { return ProbeIsolation(true) }

// probeUnshare asks the kernel for new namespaces of flags (none of them
// a user namespace, which a process with threads cannot unshare) on a
// thread of its own, which then ends with them: no process is started.
func probeUnshare(flags int) error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime ends this thread with the goroutine,
		// so no other goroutine ever runs in its namespaces.
		runtime.LockOSThread()
		done <- unix.Unshare(flags)
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	return nil
}

// probeClone starts this binary as the userns-hold applet in new
// namespaces, and reports whether the kernel allowed it.
func probeClone(flags uintptr, userns bool) error {
	self, err := fsops.Executable()
	if err != nil {
		return err
	}
	// Its stdin is a pipe already closed and its output goes nowhere,
	// without /dev/null: a minimal root may have no /dev at all.
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	w.Close()
	defer r.Close()
	cmd := &exec.Cmd{Path: self, Args: []string{UsernsHoldApplet}, Env: []string{}, Stdin: r, Stdout: io.Discard, Stderr: io.Discard}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if userns {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	}
	// The answer is the clone's: once the child has executed, it is
	// killed rather than left to start its Go runtime only to exit.
	if err := cmd.Start(); err != nil {
		return err
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil
}

// RootIsMountPoint reports whether / is the root of a mount (statx
// STATX_ATTR_MOUNT_ROOT, Linux 5.8); a kernel that does not say is taken
// to have one.
func RootIsMountPoint() bool {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, "/", 0, unix.STATX_BASIC_STATS, &st); err != nil {
		return true
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return true
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}
