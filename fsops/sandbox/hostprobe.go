package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"ctx/policy"
)

// HostReport is what ctx doctor tells about this host: what the sandbox
// modes need (policy.HostIsolation, as ctx agent start probes it), and the
// walls and limits every mode adds (seccomp, cgroups), with /proc, which
// the sandbox's own start needs. Every probe only asks: nothing is
// created, mounted or changed, and a child that enters namespaces exits at
// once.
type HostReport struct {
	Isolation policy.HostIsolation
	// Userns is whether this caller can make a user namespace with a mount
	// namespace in it. Isolation only asks a non-root caller (root runs
	// agents in iso uid); the report asks root too, for the users of
	// the host.
	Userns    bool
	UsernsWhy string
	Proc      bool // /proc is mounted
	Seccomp   bool
	// SeccompWhy says why a filter cannot be installed.
	SeccompWhy string
	// Cgroup is 2 or 1 when the caller may make a run's cgroup in that
	// hierarchy (as NewRunCgroup would), 0 when runs get rlimits only.
	Cgroup    int
	CgroupWhy string
}

// ProbeHost probes this host for the current caller.
func ProbeHost() HostReport {
	h := HostReport{Isolation: ProbeIsolation(true)}
	_, err := os.Stat("/proc/self/status")
	h.Proc = err == nil
	if os.Geteuid() != 0 {
		h.Userns, h.UsernsWhy = h.Isolation.Userns, h.Isolation.UsernsWhy
	} else if err := probeClone(syscall.CLONE_NEWUSER|syscall.CLONE_NEWNS, true); err != nil {
		h.UsernsWhy = err.Error()
	} else {
		h.Userns = true
	}
	if err := seccompAvailable(); err != nil {
		h.SeccompWhy = err.Error()
	} else {
		h.Seccomp = true
	}
	h.Cgroup, h.CgroupWhy = cgroupWritable()
	return h
}

// seccompAvailable asks the kernel whether a filter returning an errno,
// the action the agent filter uses, is available (SECCOMP_GET_ACTION_AVAIL:
// no filter is installed).
func seccompAvailable() error {
	action := uint32(unix.SECCOMP_RET_ERRNO)
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	switch errno {
	case 0:
		return nil
	case unix.ENOSYS:
		return errors.New("the kernel has no seccomp(2)")
	case unix.EINVAL:
		return errors.New("the kernel is built without seccomp filters (CONFIG_SECCOMP_FILTER)")
	case unix.EOPNOTSUPP:
		return errors.New("the kernel does not offer SECCOMP_RET_ERRNO")
	default:
		return fmt.Errorf("seccomp(SECCOMP_GET_ACTION_AVAIL) refused: %w", errno)
	}
}

// cgroupWritable says which hierarchy NewRunCgroup could make a run's
// cgroup in, by the same rules, without making one: v2 needs the memory
// and pids controllers and write access to the unified root's subtree
// control (and to ctx/ under it when present); v1 needs the pids and memory
// hierarchies with this process's own cgroup writable in both.
func cgroupWritable() (int, string) {
	why2 := cgroup2Writable()
	if why2 == "" {
		return 2, ""
	}
	why1 := cgroup1Writable()
	if why1 == "" {
		return 1, ""
	}
	return 0, "cgroup2: " + why2 + "; cgroup1: " + why1
}

func cgroup2Writable() string {
	mount := cgroup2Mount()
	if mount == "" {
		if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
			return "/proc is not mounted, so no hierarchy can be found"
		}
		return "no cgroup2 hierarchy mounted"
	}
	controllers, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		return err.Error()
	}
	have := strings.Fields(string(controllers))
	for _, want := range []string{"memory", "pids"} {
		if !contains(have, want) {
			return "the unified hierarchy has no " + want + " controller"
		}
	}
	for _, p := range []string{mount, filepath.Join(mount, "cgroup.subtree_control"), filepath.Join(mount, "ctx")} {
		err := unix.Access(p, unix.W_OK)
		if errors.Is(err, unix.ENOENT) && p == filepath.Join(mount, "ctx") {
			continue
		}
		if err != nil {
			return p + " is not writable by uid " + fmt.Sprint(os.Getuid()) + ": " + err.Error()
		}
	}
	return ""
}

func cgroup1Writable() string {
	mounts := cgroup1Mounts()
	own := ownCgroups1()
	for _, ctl := range []string{"pids", "memory"} {
		mount, ok := mounts[ctl]
		if !ok {
			return "no v1 " + ctl + " hierarchy"
		}
		dir := filepath.Join(mount, own[ctl])
		if err := unix.Access(dir, unix.W_OK); err != nil {
			return dir + " is not writable by uid " + fmt.Sprint(os.Getuid()) + ": " + err.Error()
		}
	}
	return ""
}
