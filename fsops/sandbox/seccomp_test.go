package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// The filter is tested in real processes: the test binary runs itself
// again as TestSeccompChild with the case to try in seccompCaseEnv. The
// child locks its thread, sets no_new_privs, installs the filter as the
// sandbox init does, makes the attempt and prints one result line. Where
// the outcome without the filter is predictable (as root, which the CI runs
// as), the same case runs unfiltered too, so a result cannot come from the
// environment instead of the filter.
const (
	seccompCaseEnv = "CTX_SECCOMP_CHILD"
	seccompModeEnv = "CTX_SECCOMP_MODE"

	// Modes of the child: install the filter (the default), run without it
	// (the control), or run under the filter its parent passed down.
	seccompFiltered   = "filtered"
	seccompUnfiltered = "unfiltered"
	seccompInherited  = "inherited"
	seccompNoNNP      = "without-no_new_privs"
	seccompNoNetwork  = "filtered-no-network" // InstallSeccompWith(NoNetwork)

	seccompResultPrefix = "seccomp-result: "
)

type seccompCase struct {
	name string
	// attempt makes the call in the child and describes the outcome:
	// "ok", an errno name, or a few words.
	attempt func() string
	want    string
	// unfilteredAsRoot is the outcome without the filter, as root, where
	// it does not depend on the kernel's configuration. The control always
	// has to differ from want, unless noControl: the call is unsafe to let
	// through, or may be refused with the same errno by a sysctl.
	unfilteredAsRoot string
	noControl        bool
	// onlyOn names the only GOARCH the case applies to.
	onlyOn string
}

func seccompCases() []seccompCase {
	return []seccompCase{
		{name: "ptrace", want: "EPERM", noControl: true, // being traced by the test would stop the child
			attempt: func() string {
				_, _, e := unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
				return errnoResult(e)
			}},
		{name: "process_vm_readv", want: "EPERM", unfilteredAsRoot: "ok",
			attempt: func() string {
				// Reading its own memory: always permitted without the filter.
				var from, to [8]byte
				local := []unix.Iovec{{Base: &to[0], Len: 8}}
				remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&from[0])), Len: 8}}
				_, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
				return errnoResult(err)
			}},
		{name: "unshare-user", want: "EPERM", unfilteredAsRoot: "EINVAL", // EINVAL: a Go process has threads
			attempt: func() string { return errnoResult(unix.Unshare(unix.CLONE_NEWUSER)) }},
		{name: "unshare-files", want: "EPERM", unfilteredAsRoot: "ok",
			attempt: func() string { return errnoResult(unix.Unshare(unix.CLONE_FILES)) }},
		{name: "clone-newuser", want: "EPERM", unfilteredAsRoot: "ok",
			attempt: func() string { return startWithCloneflags(unix.CLONE_NEWUSER) }},
		{name: "clone-newns", want: "EPERM", unfilteredAsRoot: "ok",
			attempt: func() string { return startWithCloneflags(unix.CLONE_NEWNS) }},
		{name: "clone-newnet", want: "EPERM", unfilteredAsRoot: "ok",
			attempt: func() string { return startWithCloneflags(unix.CLONE_NEWNET) }},
		{name: "clone3", want: "ENOSYS", unfilteredAsRoot: "EINVAL",
			attempt: func() string {
				// A zero-sized argument struct: refused by the kernel before
				// any process is created, so the control forks nothing.
				_, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
				return errnoResult(e)
			}},
		{name: "mount", want: "EPERM", unfilteredAsRoot: "ENOENT",
			attempt: func() string {
				return errnoResult(unix.Mount("none", "/nonexistent-ctx-seccomp", "tmpfs", 0, ""))
			}},
		{name: "umount2", want: "EPERM", unfilteredAsRoot: "ENOENT",
			attempt: func() string { return errnoResult(unix.Unmount("/nonexistent-ctx-seccomp", 0)) }},
		{name: "fsopen", want: "EPERM", unfilteredAsRoot: "ok",
			attempt: func() string {
				fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
				if err == nil {
					unix.Close(fd)
				}
				return errnoResult(err)
			}},
		{name: "setns", want: "EPERM", unfilteredAsRoot: "EBADF",
			attempt: func() string { return errnoResult(unix.Setns(-1, 0)) }},
		{name: "chroot", want: "EPERM", unfilteredAsRoot: "ENOENT",
			attempt: func() string { return errnoResult(unix.Chroot("/nonexistent-ctx-seccomp")) }},
		{name: "keyctl", want: "EPERM", unfilteredAsRoot: "ENOTSUP",
			attempt: func() string {
				_, _, e := unix.RawSyscall(unix.SYS_KEYCTL, 9999, 0, 0) // no such operation
				return errnoResult(e)
			}},
		{name: "bpf", want: "EPERM", unfilteredAsRoot: "EINVAL",
			attempt: func() string {
				_, _, e := unix.RawSyscall(unix.SYS_BPF, 9999, 0, 0) // no such command
				return errnoResult(e)
			}},
		{name: "perf_event_open", want: "EPERM", unfilteredAsRoot: "EFAULT",
			attempt: func() string {
				_, _, e := unix.RawSyscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0)
				return errnoResult(e)
			}},
		{name: "io_uring_setup", want: "EPERM", noControl: true, // kernel.io_uring_disabled=2 answers EPERM too
			attempt: func() string {
				_, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 0, 0, 0)
				return errnoResult(e)
			}},
		{name: "finit_module", want: "EPERM", // ENOSYS without module support, else EBADF
			attempt: func() string {
				_, _, e := unix.RawSyscall(unix.SYS_FINIT_MODULE, ^uintptr(0), 0, 0)
				return errnoResult(e)
			}},
		{name: "iopl", want: "EPERM", onlyOn: "amd64", // ENOSYS without CONFIG_X86_IOPL_IOPERM, else ok
			attempt: func() string {
				_, _, e := unix.RawSyscall(172, 3, 0, 0) // iopl(3) on x86_64
				return errnoResult(e)
			}},
		{name: "personality-set", want: "EPERM", unfilteredAsRoot: "ok",
			attempt: func() string {
				const addrNoRandomize = 0x0040000
				_, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, addrNoRandomize, 0, 0)
				return errnoResult(e)
			}},
		{name: "personality-query", want: "ok", unfilteredAsRoot: "ok",
			attempt: func() string {
				_, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
				return errnoResult(e)
			}},
		{name: "tiocsti", want: "EPERM slave-input=0 master-output=0",
			unfilteredAsRoot: "ok slave-input=1 master-output=1", attempt: injectIntoTerminal},
		{name: "tioclinux", want: "EPERM", unfilteredAsRoot: "ENOTTY",
			attempt: func() string {
				return onPty(func(master, slave int) string {
					subcode := byte(7) // TIOCL_GETSHIFTSTATE
					_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(slave), unix.TIOCLINUX, uintptr(unsafe.Pointer(&subcode)))
					return errnoResult(e)
				})
			}},
		{name: "tiocgwinsz", want: "ok", unfilteredAsRoot: "ok",
			attempt: func() string {
				return onPty(func(master, slave int) string {
					_, err := unix.IoctlGetWinsize(slave, unix.TIOCGWINSZ)
					return errnoResult(err)
				})
			}},
		{name: "fork-exec", want: "ok", unfilteredAsRoot: "ok",
			attempt: func() string { return errnoResult(exec.Command("/bin/true").Run()) }},
		{name: "shell", want: "ok", unfilteredAsRoot: "ok",
			attempt: func() string {
				out, err := exec.Command("/bin/sh", "-c", "echo ok").Output()
				if err != nil {
					return err.Error()
				}
				return strings.TrimSpace(string(out))
			}},
		{name: "read-file", want: "1 filter more than the parent", unfilteredAsRoot: "0 filter more than the parent",
			attempt: func() string {
				status, err := os.ReadFile("/proc/self/status")
				if err != nil {
					return errnoResult(err)
				}
				return fmt.Sprintf("%d filter more than the parent", seccompFilters(string(status))-parentSeccompFilters())
			}},
		{name: "all-threads", want: "EPERM on another thread, all filtered",
			unfilteredAsRoot: "ENOTSUP on another thread, none filtered", attempt: denyOnAnotherThread},
		{name: "inherited", want: "EPERM", unfilteredAsRoot: "ENOTSUP",
			attempt: func() string {
				// A child of a filtered process that installs nothing.
				out, err := seccompChild(context.Background(), "keyctl", seccompInherited).Output()
				if err != nil {
					return err.Error()
				}
				return seccompResult(out)
			}},
		{name: "x32", want: "EPERM", onlyOn: "amd64",
			attempt: func() string {
				const x32Getpid = 0x40000000 | 39
				_, _, e := unix.RawSyscall(x32Getpid, 0, 0, 0)
				return errnoResult(e)
			}},
	}
}

func TestSeccompInRealProcesses(t *testing.T) {
	for _, c := range seccompCases() {
		t.Run(c.name, func(t *testing.T) {
			if c.onlyOn != "" && c.onlyOn != runtime.GOARCH {
				t.Skipf("%s only", c.onlyOn)
			}
			t.Parallel()
			if got := runSeccompChild(t, c.name, seccompFiltered); got != c.want {
				t.Errorf("under the filter: %q, want %q", got, c.want)
			}
			if c.noControl || os.Geteuid() != 0 {
				return
			}
			got := runSeccompChild(t, c.name, seccompUnfiltered)
			if c.unfilteredAsRoot != "" && got != c.unfilteredAsRoot {
				t.Errorf("control without the filter: %q, want %q", got, c.unfilteredAsRoot)
			}
			if got == c.want && c.want != "ok" {
				t.Errorf("control without the filter: %q as well, so the test does not show the filter at work", got)
			}
		})
	}
}

// seccompNetCases are the socket families under NoNetwork (want) and
// under the plain filter (unfilteredAsRoot, here: filtered without
// NoNetwork, the network grant, which lets the inet families through).
func seccompNetCases() []seccompCase {
	sock := func(family, typ int) func() string {
		return func() string {
			fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return errnoResult(err)
		}
	}
	return []seccompCase{
		{name: "socket-inet-tcp", want: "EPERM", unfilteredAsRoot: "ok", attempt: sock(unix.AF_INET, unix.SOCK_STREAM)},
		{name: "socket-inet6-udp", want: "EPERM", unfilteredAsRoot: "ok", attempt: sock(unix.AF_INET6, unix.SOCK_DGRAM)},
		{name: "socket-netlink", want: "EPERM", unfilteredAsRoot: "ok", attempt: sock(unix.AF_NETLINK, unix.SOCK_RAW)},
		{name: "socket-unix", want: "ok", unfilteredAsRoot: "ok", attempt: sock(unix.AF_UNIX, unix.SOCK_STREAM)},
		{name: "socketpair-unix", want: "ok", unfilteredAsRoot: "ok",
			attempt: func() string {
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err == nil {
					unix.Close(fds[0])
					unix.Close(fds[1])
				}
				return errnoResult(err)
			}},
		{name: "socketpair-inet", want: "EPERM", unfilteredAsRoot: "ENOTSUP", // EOPNOTSUPP
			attempt: func() string {
				_, err := unix.Socketpair(unix.AF_INET, unix.SOCK_STREAM, 0)
				return errnoResult(err)
			}},
		{name: "socket-netlink-diag", want: "EPERM", unfilteredAsRoot: "EPERM", attempt: func() string {
			fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
			if err == nil {
				unix.Close(fd)
			}
			return errnoResult(err)
		}},
		// No network namespace confines vsock: refused with the grant too.
		{name: "socket-vsock", want: "EPERM", unfilteredAsRoot: "EPERM", attempt: sock(unix.AF_VSOCK, unix.SOCK_STREAM)},
		{name: "socketpair-vsock", want: "EPERM", unfilteredAsRoot: "EPERM",
			attempt: func() string {
				_, err := unix.Socketpair(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
				return errnoResult(err)
			}},
		{name: "go-net-dial", want: "EPERM", unfilteredAsRoot: "ECONNREFUSED",
			attempt: func() string {
				// What a program sees: Go's net package, to a closed port.
				_, err := net.Dial("tcp", "127.0.0.1:1")
				return errnoResult(err)
			}},
	}
}

// TestSeccompNoNetworkInRealProcesses: under NoNetwork only unix sockets
// are made; under the plain filter the inet families still are, so the
// refusal comes from the option. What both refuse (vsock, sock_diag) is
// made without any filter as root, so the refusal comes from the filter.
func TestSeccompNoNetworkInRealProcesses(t *testing.T) {
	for _, c := range seccompNetCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := runSeccompChild(t, c.name, seccompNoNetwork); got != c.want {
				t.Errorf("under the NoNetwork filter: %q, want %q", got, c.want)
			}
			if got := runSeccompChild(t, c.name, seccompFiltered); got != c.unfilteredAsRoot {
				t.Errorf("under the plain filter: %q, want %q", got, c.unfilteredAsRoot)
			}
			if c.unfilteredAsRoot != "EPERM" || os.Geteuid() != 0 {
				return
			}
			if got := runSeccompChild(t, c.name, seccompUnfiltered); got == "EPERM" {
				t.Errorf("without the filter: %q as well, so the test does not show the filter at work", got)
			}
		})
	}
}

// TestSeccompKillsForeignArchitecture makes an i386 system call through
// int 0x80 from an x86_64 process: the filter kills the process.
func TestSeccompKillsForeignArchitecture(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("int 0x80 exists on amd64 only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := seccompChild(ctx, "int80", seccompFiltered)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child was not killed: %v, output %q", err, out)
	}
	ws := exit.Sys().(syscall.WaitStatus)
	if ws.Signaled() && ws.Signal() == syscall.SIGSYS {
		return
	}
	if strings.Contains(stderr.String(), "SIGSEGV") {
		// Without IA32 emulation int 0x80 faults before any filter runs.
		t.Skipf("kernel has no i386 entry point: %s", firstLine(stderr.String()))
	}
	t.Fatalf("child ended with %v, want killed by SIGSYS; output %q, stderr %q", ws, out, stderr.String())
}

// TestSeccompRequiresNoNewPrivs: without no_new_privs the kernel would
// still take the filter from root, but a set-id program could then gain
// privileges under it; InstallSeccompWith refuses instead.
func TestSeccompRequiresNoNewPrivs(t *testing.T) {
	if nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); nnp == 1 {
		t.Skip("the test process already has no_new_privs, and its children inherit it")
	}
	got := runSeccompChild(t, "ptrace", seccompNoNNP)
	if !strings.Contains(got, "no_new_privs is not set") {
		t.Errorf("InstallSeccomp without no_new_privs: %q", got)
	}
}

// TestSeccompChild is the child side of the tests above; it does nothing
// unless the parent set seccompCaseEnv.
func TestSeccompChild(t *testing.T) {
	name := os.Getenv(seccompCaseEnv)
	if name == "" {
		return
	}
	os.Exit(seccompChildMain(name, os.Getenv(seccompModeEnv)))
}

func seccompChildMain(name, mode string) int {
	// The filter goes on this thread and, through TSYNC, on the others.
	runtime.LockOSThread()
	// A killed child must not leave a core file in the package directory.
	unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	if mode == seccompFiltered || mode == seccompNoNetwork {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			fmt.Printf("%sno_new_privs: %v\n", seccompResultPrefix, err)
			return 1
		}
		if err := InstallSeccompWith(SeccompOptions{NoNetwork: mode == seccompNoNetwork}); err != nil {
			fmt.Printf("%sInstallSeccomp: %v\n", seccompResultPrefix, err)
			return 1
		}
	}
	if mode == seccompNoNNP {
		fmt.Printf("%s%v\n", seccompResultPrefix, InstallSeccompWith(SeccompOptions{}))
		return 0
	}
	if name == "int80" {
		fmt.Printf("%ssurvived: i386 getpid returned %d\n", seccompResultPrefix, callI386Getpid())
		return 0
	}
	for _, c := range append(seccompCases(), seccompNetCases()...) {
		if c.name == name {
			fmt.Printf("%s%s\n", seccompResultPrefix, c.attempt())
			return 0
		}
	}
	fmt.Printf("%sno case %q\n", seccompResultPrefix, name)
	return 1
}

func seccompChild(ctx context.Context, name, mode string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSeccompChild$")
	cmd.Env = append(os.Environ(), seccompCaseEnv+"="+name, seccompModeEnv+"="+mode)
	return cmd
}

func runSeccompChild(t *testing.T, name, mode string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := seccompChild(ctx, name, mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s child (%s): %v\nstdout: %s\nstderr: %s", name, mode, err, out, stderr.String())
	}
	return seccompResult(out)
}

func seccompResult(out []byte) string {
	scanner := bufio.NewScanner(bytes.NewReader(out))
	for scanner.Scan() {
		if result, ok := strings.CutPrefix(scanner.Text(), seccompResultPrefix); ok {
			return result
		}
	}
	return fmt.Sprintf("no result in %q", out)
}

// errnoResult names the errno in err, "ok" for none.
func errnoResult(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if errno == 0 {
			return "ok"
		}
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}

// startWithCloneflags starts /bin/true in new namespaces, as a tool would
// through os/exec: Go asks clone, not clone3, for these flags.
func startWithCloneflags(flags uintptr) string {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	if flags&unix.CLONE_NEWUSER != 0 {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	return errnoResult(cmd.Run())
}

// onPty runs use on a fresh pseudo-terminal pair.
func onPty(use func(master, slave int) string) string {
	master, slave, err := pty.Open()
	if err != nil {
		return "opening a pty: " + err.Error()
	}
	defer master.Close()
	defer slave.Close()
	return use(int(master.Fd()), int(slave.Fd()))
}

// injectIntoTerminal tries TIOCSTI on a terminal, then looks where an
// injected byte would show: in the input a program reading the terminal
// gets (the attack: the shell that started the agent runs it), and in the
// echo the terminal's owner receives on the master.
func injectIntoTerminal() string {
	return onPty(func(master, slave int) string {
		// Non-canonical input makes a single byte readable at once; echo
		// stays on so the master sees what the terminal received.
		termios, err := unix.IoctlGetTermios(slave, unix.TCGETS)
		if err != nil {
			return "TCGETS: " + err.Error()
		}
		termios.Lflag &^= unix.ICANON
		termios.Lflag |= unix.ECHO
		if err := unix.IoctlSetTermios(slave, unix.TCSETS, termios); err != nil {
			return "TCSETS: " + err.Error()
		}
		injected := byte('X')
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(slave), unix.TIOCSTI, uintptr(unsafe.Pointer(&injected)))
		pending, err := unix.IoctlGetInt(slave, unix.TIOCINQ)
		if err != nil {
			return "TIOCINQ: " + err.Error()
		}
		echoed := 0
		fds := []unix.PollFd{{Fd: int32(master), Events: unix.POLLIN}}
		if n, _ := unix.Poll(fds, 500); n > 0 {
			buf := make([]byte, 64)
			echoed, _ = unix.Read(master, buf)
		}
		return fmt.Sprintf("%s slave-input=%d master-output=%d", errnoResult(e), pending, echoed)
	})
}

// denyOnAnotherThread makes a denied call from an OS thread other than the
// one that installed the filter, and checks every thread's status: TSYNC
// must have put the filter on all of them.
func denyOnAnotherThread() string {
	installer := unix.Gettid()
	result := make(chan string)
	go func() {
		runtime.LockOSThread() // this goroutine's own thread, held until exit
		if unix.Gettid() == installer {
			result <- "ran on the installing thread"
			return
		}
		_, _, e := unix.RawSyscall(unix.SYS_KEYCTL, 9999, 0, 0)
		result <- errnoResult(e)
	}()
	got := <-result
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err.Error()
	}
	filtered, alive := 0, 0
	for _, task := range tasks {
		status, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			// The thread exited since the listing (a loaded machine
			// retires runtime threads): it is not counted either way.
			continue
		}
		alive++
		if seccompFilters(string(status)) > parentSeccompFilters() {
			filtered++
		}
	}
	switch {
	case alive < 2:
		return "only one thread"
	case filtered == alive:
		return got + " on another thread, all filtered"
	case filtered == 0:
		return got + " on another thread, none filtered"
	}
	return fmt.Sprintf("%s on another thread, %d of %d threads filtered", got, filtered, alive)
}

// seccompFilters is the number of filters a /proc/*/status shows. Results
// are relative to the test process, which may itself run under a filter
// (in a container, say).
func seccompFilters(status string) int {
	for line := range strings.Lines(status) {
		if value, ok := strings.CutPrefix(line, "Seccomp_filters:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(value))
			if err == nil {
				return n
			}
		}
	}
	return -1
}

func parentSeccompFilters() int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", os.Getppid()))
	if err != nil {
		return -1
	}
	return seccompFilters(string(status))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// callI386Getpid makes the i386 getpid call (number 20) through int 0x80
// from machine code in an executable page: x/sys has no way to enter the
// compat entry point, and the test may not add an assembly file.
func callI386Getpid() int {
	code := []byte{
		0xb8, 0x14, 0x00, 0x00, 0x00, // mov eax, 20
		0xcd, 0x80, // int 0x80
		0xc3, // ret (eax, the result, is lost to Go: the call is all that matters)
	}
	page, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return -1
	}
	copy(page, code)
	// A Go func value points at a word holding the code address.
	entry := uintptr(unsafe.Pointer(&page[0]))
	funcValue := &entry
	call := *(*func())(unsafe.Pointer(&funcValue))
	call()
	return os.Getpid()
}

// The remaining tests read the program itself, without installing it.

func TestSeccompProgramShape(t *testing.T) {
	if _, err := nativeSeccompArch(); err != nil {
		t.Skip(err)
	}
	for _, opts := range []SeccompOptions{{}, {NoNetwork: true}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) { checkSeccompProgramShape(t, opts) })
	}
}

func checkSeccompProgramShape(t *testing.T, opts SeccompOptions) {
	prog, err := agentSeccompFilter(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) < 10 || len(prog) > unix.BPF_MAXINSNS {
		t.Fatalf("program of %d instructions", len(prog))
	}
	t.Logf("%d instructions", len(prog))
	if first := prog[0]; first.Code != unix.BPF_LD|unix.BPF_W|unix.BPF_ABS || first.K != seccompDataArch {
		t.Errorf("first instruction %+v does not load the architecture", first)
	}
	actions := map[uint32]bool{}
	for i, ins := range prog {
		switch ins.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if ins.K%4 != 0 || ins.K >= seccompDataArgs+6*8 {
				t.Errorf("%d: load from offset %d", i, ins.K)
			}
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			if i+1+int(max(ins.Jt, ins.Jf)) >= len(prog) {
				t.Errorf("%d: jump %+v runs off the end", i, ins)
			}
		case unix.BPF_JMP | unix.BPF_JA:
			if i+1+int(ins.K) >= len(prog) {
				t.Errorf("%d: jump %+v runs off the end", i, ins)
			}
		case unix.BPF_RET | unix.BPF_K:
			actions[ins.K] = true
		default:
			t.Errorf("%d: unexpected instruction %+v", i, ins)
		}
	}
	if last := prog[len(prog)-1]; last.Code != unix.BPF_RET|unix.BPF_K {
		t.Errorf("last instruction %+v is not a return", last)
	}
	want := map[uint32]bool{
		unix.SECCOMP_RET_ALLOW:                       true,
		unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM):  true,
		unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS): true,
		unix.SECCOMP_RET_KILL_PROCESS:                true,
	}
	for action := range actions {
		if !want[action] {
			t.Errorf("unexpected action %#x", action)
		}
	}
	for action := range want {
		if !actions[action] {
			t.Errorf("action %#x never returned", action)
		}
	}
}

// TestSeccompProgramDecisions runs the program in a small classic-BPF
// interpreter over chosen seccomp_data, reaching the cases a live process
// cannot (other architectures, garbage in the high words of arguments).
func TestSeccompProgramDecisions(t *testing.T) {
	arch, err := nativeSeccompArch()
	if err != nil {
		t.Skip(err)
	}
	prog, err := arch.filter(SeccompOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		kill   = unix.SECCOMP_RET_KILL_PROCESS
	)
	native := arch.auditArch
	tests := []seccompDecision{
		{"getpid", unix.SYS_GETPID, native, [6]uint64{}, allow},
		{"read", unix.SYS_READ, native, [6]uint64{}, allow},
		{"execve", unix.SYS_EXECVE, native, [6]uint64{}, allow},
		{"getpid of a foreign architecture", unix.SYS_GETPID, foreignAuditArch(native), [6]uint64{}, kill},
		{"unknown architecture", unix.SYS_GETPID, 0, [6]uint64{}, kill},
		{"clone for a thread", unix.SYS_CLONE, native, [6]uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD}, allow},
		{"clone for fork", unix.SYS_CLONE, native, [6]uint64{uint64(unix.SIGCHLD)}, allow},
		{"clone for os/exec", unix.SYS_CLONE, native, [6]uint64{unix.CLONE_VFORK | unix.CLONE_VM | unix.CLONE_PIDFD | uint64(unix.SIGCHLD)}, allow},
		// The kernel reads clone's flags as 32 bits: a bit above them asks nothing.
		{"clone, namespace bit in the high word", unix.SYS_CLONE, native, [6]uint64{unix.CLONE_NEWUSER << 32}, allow},
		{"clone3", unix.SYS_CLONE3, native, [6]uint64{}, enosys},
		{"ioctl TIOCGWINSZ", unix.SYS_IOCTL, native, [6]uint64{1, unix.TIOCGWINSZ}, allow},
		{"ioctl TIOCSTI, garbage high word", unix.SYS_IOCTL, native, [6]uint64{1, 0xdead<<32 | unix.TIOCSTI}, eperm},
		{"ioctl with TIOCSTI as its fd", unix.SYS_IOCTL, native, [6]uint64{unix.TIOCSTI, unix.TIOCGWINSZ}, allow},
		{"personality PER_LINUX", unix.SYS_PERSONALITY, native, [6]uint64{0}, allow},
		{"personality query", unix.SYS_PERSONALITY, native, [6]uint64{0xffffffff}, allow},
		{"personality query, 64-bit", unix.SYS_PERSONALITY, native, [6]uint64{^uint64(0)}, allow},
		{"personality PER_LINUX32", unix.SYS_PERSONALITY, native, [6]uint64{0x0008}, eperm},
		{"personality ADDR_NO_RANDOMIZE", unix.SYS_PERSONALITY, native, [6]uint64{0x0040000}, eperm},
	}
	for _, call := range arch.denied() {
		tests = append(tests, seccompDecision{call.name, call.nr, native, [6]uint64{}, eperm})
	}
	for _, flag := range cloneNamespaceFlags {
		tests = append(tests, seccompDecision{"clone " + flag.name, unix.SYS_CLONE, native, [6]uint64{uint64(flag.bit) | uint64(unix.SIGCHLD)}, eperm})
	}
	for _, request := range deniedIoctls {
		tests = append(tests, seccompDecision{"ioctl " + request.name, unix.SYS_IOCTL, native, [6]uint64{0, uint64(request.request)}, eperm})
	}
	if arch.refuseX32 {
		tests = append(tests, seccompDecision{"x32 getpid", x32SyscallBit | unix.SYS_GETPID, native, [6]uint64{}, eperm})
	}
	// Without NoNetwork (the network grant) the families a network
	// namespace confines, netlink for routing only; never vsock and the
	// rest, which no namespace confines.
	tests = append(tests,
		seccompDecision{"socket AF_INET", unix.SYS_SOCKET, native, [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, allow},
		seccompDecision{"socket AF_INET6", unix.SYS_SOCKET, native, [6]uint64{unix.AF_INET6, unix.SOCK_DGRAM}, allow},
		seccompDecision{"socket AF_UNIX", unix.SYS_SOCKET, native, [6]uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, allow},
		seccompDecision{"socket AF_NETLINK route", unix.SYS_SOCKET, native, [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, allow},
		seccompDecision{"socket AF_NETLINK route, garbage high words", unix.SYS_SOCKET, native, [6]uint64{0xdead<<32 | unix.AF_NETLINK, unix.SOCK_RAW, 0xbeef<<32 | unix.NETLINK_ROUTE}, allow},
		seccompDecision{"socket AF_NETLINK sock_diag", unix.SYS_SOCKET, native, [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG}, eperm},
		seccompDecision{"socket AF_NETLINK uevent", unix.SYS_SOCKET, native, [6]uint64{unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_KOBJECT_UEVENT}, eperm},
		seccompDecision{"socket AF_VSOCK", unix.SYS_SOCKET, native, [6]uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, eperm},
		seccompDecision{"socket AF_PACKET", unix.SYS_SOCKET, native, [6]uint64{unix.AF_PACKET, unix.SOCK_RAW}, eperm},
		seccompDecision{"socket AF_BLUETOOTH", unix.SYS_SOCKET, native, [6]uint64{unix.AF_BLUETOOTH, unix.SOCK_STREAM}, eperm},
		seccompDecision{"socket AF_ALG", unix.SYS_SOCKET, native, [6]uint64{unix.AF_ALG, unix.SOCK_SEQPACKET}, eperm},
		seccompDecision{"socket AF_XDP", unix.SYS_SOCKET, native, [6]uint64{unix.AF_XDP, unix.SOCK_RAW}, eperm},
		seccompDecision{"socket AF_INET in the high word only", unix.SYS_SOCKET, native, [6]uint64{unix.AF_VSOCK | unix.AF_INET<<32}, eperm},
		seccompDecision{"socketpair AF_VSOCK", unix.SYS_SOCKETPAIR, native, [6]uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, eperm},
		seccompDecision{"socketpair AF_UNIX", unix.SYS_SOCKETPAIR, native, [6]uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, allow},
	)
	for _, tt := range tests {
		if got := runSeccompBPF(t, prog, tt.nr, tt.arch, tt.args); got != tt.want {
			t.Errorf("%s: action %#x, want %#x", tt.what, got, tt.want)
		}
	}

	// NoNetwork: only AF_UNIX, for socket and socketpair; the rest of the
	// filter unchanged.
	noNet, err := arch.filter(SeccompOptions{NoNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	netTests := []seccompDecision{
		{"socket AF_UNIX", unix.SYS_SOCKET, native, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}, allow},
		{"socket AF_UNIX, garbage high word", unix.SYS_SOCKET, native, [6]uint64{0xdead<<32 | unix.AF_UNIX}, allow},
		{"socketpair AF_UNIX", unix.SYS_SOCKETPAIR, native, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}, allow},
		{"socket AF_INET", unix.SYS_SOCKET, native, [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, eperm},
		{"socket AF_INET6", unix.SYS_SOCKET, native, [6]uint64{unix.AF_INET6, unix.SOCK_DGRAM}, eperm},
		{"socket AF_NETLINK", unix.SYS_SOCKET, native, [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW}, eperm},
		{"socket AF_PACKET", unix.SYS_SOCKET, native, [6]uint64{unix.AF_PACKET, unix.SOCK_RAW}, eperm},
		{"socket AF_VSOCK", unix.SYS_SOCKET, native, [6]uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, eperm},
		{"socket family 0", unix.SYS_SOCKET, native, [6]uint64{0}, eperm},
		{"socketpair AF_INET", unix.SYS_SOCKETPAIR, native, [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, eperm},
		{"connect", unix.SYS_CONNECT, native, [6]uint64{3}, allow},
		{"getpid", unix.SYS_GETPID, native, [6]uint64{}, allow},
		{"ptrace", unix.SYS_PTRACE, native, [6]uint64{}, eperm},
		{"clone3", unix.SYS_CLONE3, native, [6]uint64{}, enosys},
		{"socket AF_INET, foreign architecture", unix.SYS_SOCKET, foreignAuditArch(native), [6]uint64{unix.AF_INET}, kill},
	}
	for _, tt := range netTests {
		if got := runSeccompBPF(t, noNet, tt.nr, tt.arch, tt.args); got != tt.want {
			t.Errorf("NoNetwork %s: action %#x, want %#x", tt.what, got, tt.want)
		}
	}
}

type seccompDecision struct {
	what string
	nr   uint32
	arch uint32
	args [6]uint64
	want uint32
}

// foreignAuditArch is the architecture a process of this one could enter
// the kernel as by another way: i386 on x86_64, 32-bit ARM on arm64.
func foreignAuditArch(native uint32) uint32 {
	if native == unix.AUDIT_ARCH_X86_64 {
		return unix.AUDIT_ARCH_I386
	}
	return unix.AUDIT_ARCH_ARM
}

// runSeccompBPF interprets the instructions the assembler emits over one
// seccomp_data and returns the action.
func runSeccompBPF(t *testing.T, prog []unix.SockFilter, nr, arch uint32, args [6]uint64) uint32 {
	t.Helper()
	data := make([]byte, seccompDataArgs+6*8)
	binary.LittleEndian.PutUint32(data[seccompDataNr:], nr)
	binary.LittleEndian.PutUint32(data[seccompDataArch:], arch)
	for i, arg := range args {
		binary.LittleEndian.PutUint64(data[seccompDataArgs+8*i:], arg)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		switch ins.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[ins.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= ins.K
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(ins.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if acc == ins.K {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			if acc&ins.K != 0 {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return ins.K
		default:
			t.Fatalf("%d: instruction %+v not interpreted", pc, ins)
		}
	}
	t.Fatal("program ran off its end")
	return 0
}

func TestBPFAssemblerRefusesBadJumps(t *testing.T) {
	t.Run("longer than 255", func(t *testing.T) {
		var a bpfAssembler
		a.load(seccompDataNr)
		a.jumpIfEqual(1, "far", bpfNext)
		for range 256 {
			a.load(seccompDataNr)
		}
		a.mark("far")
		a.ret(unix.SECCOMP_RET_ALLOW)
		if _, err := a.assemble(); err == nil || !strings.Contains(err.Error(), "more than 255") {
			t.Errorf("err = %v, want a jump too long", err)
		}
	})
	t.Run("exactly 255", func(t *testing.T) {
		var a bpfAssembler
		a.jumpIfEqual(1, "far", bpfNext)
		for range 255 {
			a.load(seccompDataNr)
		}
		a.mark("far")
		a.ret(unix.SECCOMP_RET_ALLOW)
		prog, err := a.assemble()
		if err != nil {
			t.Fatal(err)
		}
		if prog[0].Jt != 255 || prog[0].Jf != 0 {
			t.Errorf("jump %+v, want jt 255 jf 0", prog[0])
		}
	})
	t.Run("unmarked label", func(t *testing.T) {
		var a bpfAssembler
		a.jumpIfEqual(1, "nowhere", bpfNext)
		a.ret(unix.SECCOMP_RET_ALLOW)
		if _, err := a.assemble(); err == nil {
			t.Error("assembled a jump to an unmarked label")
		}
	})
	t.Run("backwards", func(t *testing.T) {
		var a bpfAssembler
		a.mark("back")
		a.load(seccompDataNr)
		a.jump("back")
		a.ret(unix.SECCOMP_RET_ALLOW)
		if _, err := a.assemble(); err == nil {
			t.Error("assembled a backward jump")
		}
	})
	t.Run("no final return", func(t *testing.T) {
		var a bpfAssembler
		a.load(seccompDataNr)
		if _, err := a.assemble(); err == nil {
			t.Error("assembled a program that can run off its end")
		}
	})
}

func TestSeccompDeniedNames(t *testing.T) {
	if _, err := nativeSeccompArch(); err != nil {
		t.Skip(err)
	}
	names := SeccompDeniedNames()
	if len(names) == 0 {
		t.Fatal("no names")
	}
	if !slices.IsSorted(names) {
		t.Errorf("not sorted: %q", names)
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("duplicates: %q", names)
	}
	for _, want := range []string{"ptrace", "unshare", "mount", "io_uring_setup", "clone(CLONE_NEWUSER)", "clone3", "ioctl(TIOCSTI)", "ioctl(TIOCLINUX)"} {
		if !slices.Contains(names, want) {
			t.Errorf("%q missing from %q", want, names)
		}
	}
}
