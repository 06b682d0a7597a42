package sandbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"ctx/fsops/cgroup"
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
	// hierarchy (as cgroup.New would), 0 when runs get rlimits only.
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
	h.Cgroup, h.CgroupWhy = cgroup.Writable()
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
