package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The agent's seccomp filter (DESIGN §16 rule 5). It takes away the kernel
// interfaces an agent needs for no honest work and that have a record of
// escapes or privilege escalation: debugging other processes, new
// namespaces, the keyring, bpf, perf, userfaultfd, io_uring, kexec and
// modules, file handles, the mount API, swap, reboot, acct, syslog, and
// typing into a terminal (TIOCSTI, TIOCLINUX). Refused calls fail with EPERM
// rather than killing the caller, so programs that probe for a feature
// (a runtime trying io_uring, a shell trying unshare) take their fallback
// instead of dying. Everything else is allowed: the filter is a deny list,
// as Docker's default profile effectively is for the calls listed here.
//
// Two cases are not EPERM:
//
//   - clone3 fails with ENOSYS. Its flags live in a struct in memory that a
//     seccomp filter cannot read, so the filter cannot tell a thread from a
//     new user namespace; ENOSYS makes glibc and Go fall back to clone, whose
//     flags it can check (Docker does the same). Go itself only uses clone3
//     for SysProcAttr.UseCgroupFD and CLONE_NEWTIME, which then fail.
//   - A system call made through another architecture's entry point kills the
//     whole process (SECCOMP_RET_KILL_PROCESS). Under a foreign architecture
//     every number means a different call (i386 number 26 is ptrace, x86_64
//     26 is msync), so a table for the native one cannot judge it, and no
//     program built for this machine makes such a call by mistake: it is an
//     attempt to step around the filter, as with int 0x80 on x86_64.
//     libseccomp (Docker, flatpak) likewise kills calls from any
//     architecture its filter was not built for; Docker builds in the i386
//     table as well, ctx has only the native one to offer. The x32
//     ABI, which shares the x86_64 architecture value and marks its numbers
//     with __X32_SYSCALL_BIT, is refused with EPERM like any other denied
//     call: the kernel itself answers ENOSYS when it lacks x32, so callers
//     already expect the failure.
//
// The filter is built for the architecture of this build (GOARCH amd64 or
// arm64, where ctx runs) from x/sys's syscall numbers; other builds get an
// error from InstallSeccompWith rather than a filter with the wrong numbers.

// SeccompOptions are the variants of the agent filter.
type SeccompOptions struct {
	// NoNetwork allows socket(2) and socketpair(2) for AF_UNIX only; any
	// other family is EPERM. It is for every run whose agent lacks
	// network:default connect. Without a network namespace (iso landlock,
	// iso shared) the host's network would otherwise be one socket away;
	// with one, families the namespace does not confine would be:
	// AF_VSOCK reaches the hypervisor and other guests whatever the
	// namespace. AF_NETLINK goes too (routing tables, interfaces, audit:
	// host state the agent has no business reading or changing), and so
	// do raw and packet sockets. Descriptors the process already holds are
	// not affected: ctx passes none beyond the standard streams and the
	// run capability, a unix socket.
	//
	// Without NoNetwork (the grant) the families are those a network
	// namespace confines and honest network work needs (networkFamilies):
	// AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK with NETLINK_ROUTE alone
	// (getaddrinfo and interface listing). Everything else stays EPERM:
	// AF_VSOCK, AF_PACKET, AF_BLUETOOTH, AF_ALG (the kernel's crypto, a
	// record of bugs), AF_XDP, AF_KEY, netlink's other protocols
	// (sock_diag, uevents, audit, netfilter), and families a later kernel
	// adds.
	NoNetwork bool
	// TCPOnly (iso landlock's egress, without NoNetwork) narrows the
	// families to AF_UNIX, and AF_INET and AF_INET6 of SOCK_STREAM with
	// protocol 0 or IPPROTO_TCP: the TCP that Landlock's port rule
	// confines, never UDP, raw, SCTP or MPTCP sockets, which it does not.
	TCPOnly bool
}

// InstallSeccompWith installs the agent filter with opts on the calling thread (the caller has
// locked its OS thread and already set no_new_privs). Children forked from this
// thread inherit it. Returns an error naming the step on failure.
// The error is not an Error: the caller names its own step around it.
//
// The filter goes in with seccomp(2) and SECCOMP_FILTER_FLAG_TSYNC, so the
// kernel puts it on every thread of the process at once, not only the
// calling one. Without TSYNC the other threads of a Go program stay
// unfiltered, and any goroutine that forks from one of them (os/exec on an
// unlocked goroutine, a library starting a helper) starts a process outside
// the filter; threads the runtime creates later are cloned from a filtered
// one and inherit it either way. TSYNC also sets no_new_privs on the other
// threads. The cost is that the calling process is itself filtered for the
// rest of its life: the sandbox init only forks, waits and signals after this
// point, and none of that is refused. A thread that already has a different
// filter makes TSYNC fail as a whole, and that is reported, never half done.
func InstallSeccompWith(opts SeccompOptions) error {
	filter, err := agentSeccompFilter(opts)
	if err != nil {
		return fmt.Errorf("building the filter: %w", err)
	}
	// The kernel accepts a filter without no_new_privs only from a caller
	// with CAP_SYS_ADMIN, and then a later execve of a set-id program could
	// gain privileges the filter was meant to cap: insist on it instead.
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("reading no_new_privs: %w", err)
	}
	if nnp != 1 {
		return errors.New("no_new_privs is not set on the calling thread")
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): %w", errno)
	}
	if r != 0 {
		// With TSYNC a positive return is the id of a thread that could not
		// take the filter (it has another one); then no thread has it.
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): thread %d could not be synchronized", r)
	}
	return nil
}

// SeccompDeniedNames lists the syscalls and ioctls the filter refuses,
// e.g. "ptrace", "clone(CLONE_NEWUSER)", "ioctl(TIOCSTI)", for the manual:
// its test checks that ctx man sandbox names every one. It is empty on an architecture the filter does not support. The names come
// from the same tables as the filter, so the two cannot disagree.
func SeccompDeniedNames() []string {
	arch, err := nativeSeccompArch()
	if err != nil {
		return nil
	}
	var names []string
	for _, call := range arch.denied() {
		names = append(names, call.name)
	}
	for _, flag := range cloneNamespaceFlags {
		names = append(names, "clone("+flag.name+")")
	}
	for _, request := range deniedIoctls {
		names = append(names, "ioctl("+request.name+")")
	}
	names = append(names, "clone3", "personality(other than PER_LINUX)")
	slices.Sort(names)
	return names
}

type deniedSyscall struct {
	name string
	nr   uint32
}

// deniedEverywhere is refused with EPERM whatever the arguments. The
// numbers are the build architecture's, through x/sys.
var deniedEverywhere = []deniedSyscall{
	// Reading and steering other processes; kcmp, pidfd_getfd and
	// process_madvise need the same ptrace access check, and Docker
	// groups them with ptrace.
	{"ptrace", unix.SYS_PTRACE},
	{"process_vm_readv", unix.SYS_PROCESS_VM_READV},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
	{"kcmp", unix.SYS_KCMP},
	{"pidfd_getfd", unix.SYS_PIDFD_GETFD},
	{"process_madvise", unix.SYS_PROCESS_MADVISE},
	// The keyring is not namespaced: keys leak between users of a uid.
	{"keyctl", unix.SYS_KEYCTL},
	{"add_key", unix.SYS_ADD_KEY},
	{"request_key", unix.SYS_REQUEST_KEY},
	// Large kernel attack surface with a history of exploits.
	{"bpf", unix.SYS_BPF},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN},
	{"userfaultfd", unix.SYS_USERFAULTFD},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER},
	// Changing the running kernel.
	{"kexec_load", unix.SYS_KEXEC_LOAD},
	{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	{"init_module", unix.SYS_INIT_MODULE},
	{"finit_module", unix.SYS_FINIT_MODULE},
	{"delete_module", unix.SYS_DELETE_MODULE},
	// File handles open files by inode number, around the mount tree.
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT},
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
	// The mount tree is the sandbox's shape: neither the old nor the new
	// mount API, and no way into other namespaces or new ones. unshare is
	// refused whatever its flags (even CLONE_FILES, CLONE_FS): an agent
	// needs none of it, and one rule is easier to trust than a flag mask.
	{"mount", unix.SYS_MOUNT},
	{"umount2", unix.SYS_UMOUNT2},
	{"pivot_root", unix.SYS_PIVOT_ROOT},
	{"chroot", unix.SYS_CHROOT},
	{"move_mount", unix.SYS_MOVE_MOUNT},
	{"open_tree", unix.SYS_OPEN_TREE},
	{"open_tree_attr", unix.SYS_OPEN_TREE_ATTR},
	{"fsopen", unix.SYS_FSOPEN},
	{"fsconfig", unix.SYS_FSCONFIG},
	{"fsmount", unix.SYS_FSMOUNT},
	{"fspick", unix.SYS_FSPICK},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR},
	{"setns", unix.SYS_SETNS},
	{"unshare", unix.SYS_UNSHARE},
	// Host administration.
	{"swapon", unix.SYS_SWAPON},
	{"swapoff", unix.SYS_SWAPOFF},
	{"reboot", unix.SYS_REBOOT},
	{"acct", unix.SYS_ACCT},
	{"syslog", unix.SYS_SYSLOG},
	{"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE},
	{"quotactl", unix.SYS_QUOTACTL},
	{"quotactl_fd", unix.SYS_QUOTACTL_FD},
	{"vhangup", unix.SYS_VHANGUP},
}

// cloneNamespaceFlags are the clone flags that create a namespace.
// CLONE_NEWTIME (0x80) is not among them: in clone's flags word that bit
// belongs to the exit signal, and a time namespace can only be asked for
// through clone3 (refused) or unshare (refused).
var cloneNamespaceFlags = []struct {
	name string
	bit  uint32
}{
	{"CLONE_NEWNS", unix.CLONE_NEWNS},
	{"CLONE_NEWCGROUP", unix.CLONE_NEWCGROUP},
	{"CLONE_NEWUTS", unix.CLONE_NEWUTS},
	{"CLONE_NEWIPC", unix.CLONE_NEWIPC},
	{"CLONE_NEWUSER", unix.CLONE_NEWUSER},
	{"CLONE_NEWPID", unix.CLONE_NEWPID},
	{"CLONE_NEWNET", unix.CLONE_NEWNET},
}

// deniedIoctls type into a terminal's input (TIOCSTI: a command left in the
// input of the shell that started the agent runs when the agent exits) or
// reach the virtual console (TIOCLINUX: selection paste, console state).
var deniedIoctls = []struct {
	name    string
	request uint32
}{
	{"TIOCSTI", unix.TIOCSTI},
	{"TIOCLINUX", unix.TIOCLINUX},
}

const (
	// personality(2) arguments the filter lets through: PER_LINUX, the
	// default persona, and 0xffffffff, which only reads the current one.
	// Every other value is refused, Docker allowing a few more: switching
	// persona (PER_LINUX32, UNAME26) or setting flags such as
	// ADDR_NO_RANDOMIZE and READ_IMPLIES_EXEC weakens the defences of the
	// programs the agent runs and is no agent's business.
	personalityLinux = 0
	personalityQuery = 0xffffffff

	// __X32_SYSCALL_BIT marks an x32 system call on x86_64.
	x32SyscallBit = 0x40000000

	// Offsets in struct seccomp_data (linux/seccomp.h): int nr; __u32 arch;
	// __u64 instruction_pointer; __u64 args[6]. Both supported
	// architectures are little-endian, so the low 32 bits of args[i] are
	// at seccompArgs+8*i.
	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArgs = 16
)

// seccompArch is what the filter needs to know about the architecture it
// was built for.
type seccompArch struct {
	auditArch uint32
	refuseX32 bool
	// extraDenied are calls this architecture has and others do not.
	extraDenied []deniedSyscall
}

func nativeSeccompArch() (seccompArch, error) {
	switch runtime.GOARCH {
	case "amd64":
		return seccompArch{auditArch: unix.AUDIT_ARCH_X86_64, refuseX32: true,
			// I/O port access. The numbers are x86_64's (unix.SYS_IOPL and
			// unix.SYS_IOPERM): spelled out because the constants do not
			// exist in an arm64 build of this file, arm64 having no such calls.
			extraDenied: []deniedSyscall{{"iopl", 172}, {"ioperm", 173}}}, nil
	case "arm64":
		return seccompArch{auditArch: unix.AUDIT_ARCH_AARCH64}, nil
	}
	return seccompArch{}, fmt.Errorf("no seccomp filter for GOARCH=%s", runtime.GOARCH)
}

func (arch seccompArch) denied() []deniedSyscall {
	return append(slices.Clip(deniedEverywhere), arch.extraDenied...)
}

// agentSeccompFilter assembles the filter for this build's architecture.
func agentSeccompFilter(opts SeccompOptions) ([]unix.SockFilter, error) {
	arch, err := nativeSeccompArch()
	if err != nil {
		return nil, err
	}
	return arch.filter(opts)
}

// filter is one linear pass: check the architecture, then compare the call
// number against each denied call, then the calls judged by an argument.
// Return instructions are shared at the end, where every jump reaches them
// forward. A linear list costs a few dozen instructions a call, and less in
// practice: since Linux 5.11 the kernel learns which calls the filter
// allows whatever their arguments and skips the filter for those.
func (arch seccompArch) filter(opts SeccompOptions) ([]unix.SockFilter, error) {
	const (
		deny         bpfLabel = "deny"
		noSys        bpfLabel = "enosys"
		kill         bpfLabel = "kill"
		allow        bpfLabel = "allow"
		checkClone   bpfLabel = "clone"
		checkIoctl   bpfLabel = "ioctl"
		checkPerson  bpfLabel = "personality"
		checkSocket  bpfLabel = "socket"
		checkNetlink bpfLabel = "netlink"
	)
	var a bpfAssembler

	a.load(seccompDataArch)
	a.jumpIfEqual(arch.auditArch, bpfNext, kill)
	a.load(seccompDataNr)
	if arch.refuseX32 {
		a.jumpIfAnySet(x32SyscallBit, deny, bpfNext)
	}
	for _, call := range arch.denied() {
		a.jumpIfEqual(call.nr, deny, bpfNext)
	}
	a.jumpIfEqual(unix.SYS_CLONE, checkClone, bpfNext)
	a.jumpIfEqual(unix.SYS_CLONE3, noSys, bpfNext)
	a.jumpIfEqual(unix.SYS_IOCTL, checkIoctl, bpfNext)
	a.jumpIfEqual(unix.SYS_PERSONALITY, checkPerson, bpfNext)
	a.jumpIfEqual(unix.SYS_SOCKET, checkSocket, bpfNext)
	a.jumpIfEqual(unix.SYS_SOCKETPAIR, checkSocket, bpfNext)
	fastOpenDispatch(&a, opts)
	a.ret(unix.SECCOMP_RET_ALLOW)

	// clone's flags are arg 0 on both architectures (s390x swaps them, and
	// is not supported). The high word is not checked because the kernel
	// ignores it: clone takes lower_32_bits(clone_flags), so a namespace
	// bit set only there requests nothing.
	a.mark(checkClone)
	a.load(seccompDataArgs + 8*0)
	var namespaceBits uint32
	for _, flag := range cloneNamespaceFlags {
		namespaceBits |= flag.bit
	}
	a.jumpIfAnySet(namespaceBits, deny, allow)

	// ioctl's request is arg 1, an unsigned int in the kernel: the high
	// word of the register is dropped before the request is looked at, so
	// garbage there cannot disguise TIOCSTI.
	a.mark(checkIoctl)
	a.load(seccompDataArgs + 8*1)
	for _, request := range deniedIoctls {
		a.jumpIfEqual(request.request, deny, bpfNext)
	}
	a.jump(allow)

	// personality's argument is an unsigned int too: low word only.
	a.mark(checkPerson)
	a.load(seccompDataArgs + 8*0)
	a.jumpIfEqual(personalityLinux, allow, bpfNext)
	a.jumpIfEqual(personalityQuery, allow, deny)

	a.mark(checkSocket)
	socketFamilyChecks(&a, opts, allow, deny)
	fastOpenChecks(&a, opts, allow, deny)

	a.mark(deny)
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.mark(noSys)
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	a.mark(kill)
	a.ret(unix.SECCOMP_RET_KILL_PROCESS)
	a.mark(allow)
	a.ret(unix.SECCOMP_RET_ALLOW)
	return a.assemble()
}
