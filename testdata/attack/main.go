// Command attack is what a hostile agent runs inside its sandbox: the
// containment tests copy it into the workspace and check that each attempt
// is refused, and that what it aims at is untouched. It prints one line per
// attempt: NAME=ok or NAME=ERRNO.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attack tiocsti|syscalls|fds|write FILE|read FILE|connect HOST:PORT|seqpacket PATH|unix PATH|sockets|listen PORTFILE")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "tiocsti":
		tiocsti()
	case "syscalls":
		syscalls()
	case "fds":
		fds()
	case "write":
		report("write "+os.Args[2], os.WriteFile(os.Args[2], []byte(os.Args[3]), 0o644))
	case "read":
		b, err := os.ReadFile(os.Args[2])
		report("read "+os.Args[2], err)
		if err == nil {
			fmt.Printf("content=%q\n", strings.TrimSpace(string(b)))
		}
	case "connect":
		// Reach the network: a TCP connection to ADDR (the host's
		// loopback, where a test listens), one line of reply.
		conn, err := net.DialTimeout("tcp", os.Args[2], 5*time.Second)
		report("connect", err)
		if err == nil {
			b, _ := bufio.NewReader(conn).ReadString('\n')
			fmt.Printf("reply=%q\n", strings.TrimSpace(b))
			conn.Close()
		}
	case "seqpacket":
		// Reach a unix SOCK_SEQPACKET socket at PATH (a run's broker).
		name, err := sockAddr(os.Args[2])
		fd := -1
		if err == nil {
			fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		}
		if err == nil {
			err = unix.Connect(fd, &unix.SockaddrUnix{Name: name})
			unix.Close(fd)
		}
		report("seqpacket", err)
	case "listen":
		listen(os.Args[2])
	case "forgereport":
		forgeReport(os.Args[2])
	case "sockets":
		sockets()
	case "listen-unix":
		network := "unix"
		if len(os.Args) > 5 && os.Args[5] == "packet" {
			network = "unixpacket"
		}
		listenUnix(network, os.Args[2], os.Args[3], os.Args[4])
	case "race":
		n, _ := strconv.Atoi(os.Args[4])
		race(os.Args[2], os.Args[3], n)
	case "dgram":
		// Send a datagram to the unix socket at PATH from an unbound
		// datagram socket: the address lives in sendmsg's memory.
		name, err := sockAddr(os.Args[2])
		fd := -1
		if err == nil {
			fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		}
		if err == nil {
			err = unix.Sendto(fd, []byte("hello"), 0, &unix.SockaddrUnix{Name: name})
			unix.Close(fd)
		}
		report("dgram", err)
	case "unix":
		// Reach a unix stream socket at PATH (a person's agent socket,
		// a D-Bus bus), one line of reply.
		name, err := sockAddr(os.Args[2])
		var conn net.Conn
		if err == nil {
			conn, err = net.DialTimeout("unix", name, 5*time.Second)
		}
		report("unix", err)
		if err == nil {
			b, _ := bufio.NewReader(conn).ReadString('\n')
			fmt.Printf("reply=%q\n", strings.TrimSpace(b))
			conn.Close()
		}
	case "kill":
		// kill PID: a signal to a process outside the sandbox.
		pid, _ := strconv.Atoi(os.Args[2])
		report("kill", unix.Kill(pid, unix.SIGTERM))
	case "terminals":
		terminals(os.Args[2], os.Args[3])
	case "join":
		joinBrokers(os.Args[2:], nil)
	case "call":
		// call SOCKET TOOL ARGS...: a tool call through another run's broker.
		joinBrokers(os.Args[2:4], os.Args[4:])
	case "stall":
		stall(os.Args[2])
	case "plant":
		plantWorker(os.Args[2])
	case "net-serve":
		netServe(os.Args[2], os.Args[3], os.Args[4])
	case "net-get":
		netGet(os.Args[2], len(os.Args) > 3 && os.Args[3] == "direct")
	case "net-resolve":
		netResolve(os.Args[2])
	case "net-socks":
		netSOCKS(os.Args[2])
	case "net-hold":
		netHold(os.Args[2], os.Args[3], os.Args[4])
	default:
		fmt.Fprintln(os.Stderr, "unknown attack", os.Args[1])
		os.Exit(2)
	}
}

// listen is the test's side of "connect", run on the host: a TCP listener
// on 127.0.0.1 whose port goes to PORTFILE (written whole, by rename), that
// greets each connection, prints "accepted" per connection and exits
// after one, or after 60 seconds.
func listen(portFile string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := os.WriteFile(portFile+".tmp", []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil || os.Rename(portFile+".tmp", portFile) != nil {
		fmt.Fprintln(os.Stderr, "listen: writing the port:", err)
		os.Exit(1)
	}
	time.AfterFunc(60*time.Second, func() { fmt.Println("no connection in 60s"); os.Exit(1) })
	conn, err := l.Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, "accept:", err)
		os.Exit(1)
	}
	fmt.Fprintln(conn, "hello from the host")
	conn.Close()
	fmt.Println("accepted")
}

func report(name string, err error) {
	if err == nil {
		fmt.Printf("%s=ok\n", name)
		return
	}
	if errno, ok := err.(syscall.Errno); ok {
		fmt.Printf("%s=%s\n", name, unix.ErrnoName(errno))
		return
	}
	if pe, ok := err.(*os.PathError); ok {
		if errno, ok := pe.Err.(syscall.Errno); ok {
			fmt.Printf("%s=%s\n", name, unix.ErrnoName(errno))
			return
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		fmt.Printf("%s=%s\n", name, unix.ErrnoName(errno))
		return
	}
	fmt.Printf("%s=%v\n", name, err)
}

// tiocsti pushes a command into every terminal it can reach: its own
// descriptors and its controlling terminal.
func tiocsti() {
	inject := func(fd int) error {
		for _, c := range []byte("touch PWNED\n") {
			b := c
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&b))); e != 0 {
				return e
			}
		}
		return nil
	}
	for fd := 0; fd < 3; fd++ {
		report(fmt.Sprintf("tiocsti-fd%d", fd), inject(fd))
	}
	tty, err := unix.Open("/dev/tty", unix.O_RDWR, 0)
	report("open-dev-tty", err)
	if err == nil {
		report("tiocsti-dev-tty", inject(tty))
	}
	// A terminal on a standard descriptor could also be read: keystrokes.
	for fd := 0; fd < 3; fd++ {
		var ws unix.Winsize
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
		if e == 0 {
			fmt.Printf("terminal-fd%d=yes\n", fd)
		} else {
			fmt.Printf("terminal-fd%d=no\n", fd)
		}
	}
}

// syscalls tries what the seccomp filter must refuse.
func syscalls() {
	raw := func(name string, nr uintptr, a ...uintptr) {
		for len(a) < 6 {
			a = append(a, 0)
		}
		_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e == 0 {
			report(name, nil)
		} else {
			report(name, e)
		}
	}
	raw("ptrace", unix.SYS_PTRACE, unix.PTRACE_TRACEME)
	raw("unshare-user", unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
	raw("unshare-mount", unix.SYS_UNSHARE, unix.CLONE_NEWNS)
	raw("keyctl", unix.SYS_KEYCTL, 0 /* KEYCTL_GET_KEYRING_ID */, ^uintptr(3) /* session keyring */, 0)
	raw("add_key", unix.SYS_ADD_KEY, 0, 0, 0, 0, 0)
	raw("bpf", unix.SYS_BPF, 0, 0, 0)
	raw("perf_event_open", unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0)
	raw("userfaultfd", unix.SYS_USERFAULTFD, 0)
	raw("io_uring_setup", unix.SYS_IO_URING_SETUP, 1, 0)
	raw("mount", unix.SYS_MOUNT, 0, 0, 0, 0, 0)
	raw("open_tree", unix.SYS_OPEN_TREE, ^uintptr(99) /* AT_FDCWD */, 0, 0)
	raw("setns", unix.SYS_SETNS, 0, 0)
	raw("open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, 0, 0, 0)
	raw("kexec_load", unix.SYS_KEXEC_LOAD, 0, 0, 0, 0)
	raw("init_module", unix.SYS_INIT_MODULE, 0, 0, 0)
	raw("syslog", unix.SYS_SYSLOG, 3 /* SYSLOG_ACTION_READ_ALL */, 0, 0)
	raw("acct", unix.SYS_ACCT, 0)
	raw("swapoff", unix.SYS_SWAPOFF, 0)
	raw("reboot", unix.SYS_REBOOT, 0, 0, 0, 0)
	// Ordinary work still works.
	raw("getpid", unix.SYS_GETPID)
}

// sockAddr is the address of the unix socket at path: path, or, when it
// is too long for a socket address (a deep TMPDIR), /proc/self/fd/N/NAME
// through a descriptor of its directory, as ctx and any agent reach it.
// The descriptor stays open for this short-lived process.
func sockAddr(path string) (string, error) {
	if len(path) <= 107 {
		return path, nil
	}
	dir, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", dir, filepath.Base(path)), nil
}

// listenUnix is the test's side of "unix", run on the host: a person's
// listening unix stream socket at PATH with mode MODE (octal), which
// prints "accepted" and greets each connection, until STOPFILE appears;
// then it prints how many it accepted.
func listenUnix(network, path, mode, stopFile string) {
	os.Remove(path)
	name, err := sockAddr(path)
	var l net.Listener
	if err == nil {
		l, err = net.Listen(network, name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	m, _ := strconv.ParseUint(mode, 8, 32)
	os.Chmod(path, os.FileMode(m))
	accepted := make(chan struct{}, 100)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(conn, "hello from the person")
			conn.Close()
			fmt.Println("accepted")
			accepted <- struct{}{}
		}
	}()
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(stopFile); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("connections=%d\n", len(accepted))
}

// race connects n seqpacket sockets to the address in one buffer while
// another thread flips that buffer between ALLOWED (the run's broker) and
// DENIED (a person's socket): a gate that judged the caller's memory and
// then let the kernel read it again would connect some to DENIED.
func race(allowed, denied string, n int) {
	var buf [110]byte
	binary.LittleEndian.PutUint16(buf[:], unix.AF_UNIX)
	put := func(p string) {
		var name [108]byte
		copy(name[:], p)
		copy(buf[2:], name[:])
	}
	put(allowed)
	stop := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Each address stays a while, whole: a connect reads one or
			// the other, or changes under it.
			put(denied)
			spin(20000)
			put(allowed)
			spin(20000)
		}
	}()
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			counts["socket-"+unix.ErrnoName(err.(syscall.Errno))]++
			continue
		}
		_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if e == 0 {
			counts["ok"]++
		} else {
			counts[unix.ErrnoName(e)]++
		}
		unix.Close(fd)
	}
	close(stop)
	fmt.Printf("race ok=%d EACCES=%d other=%d\n", counts["ok"], counts["EACCES"], n-counts["ok"]-counts["EACCES"])
}

var spun int

// spin burns a few microseconds of the calling thread.
func spin(n int) {
	for i := 0; i < n; i++ {
		spun++
	}
}

// sockets makes a socket of each family a sandbox might be asked for and
// reports each: socket-NAME=ok or the errno.
func sockets() {
	try := func(name string, family, typ, proto int) {
		fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto)
		if err == nil {
			unix.Close(fd)
		}
		report("socket-"+name, err)
	}
	try("unix", unix.AF_UNIX, unix.SOCK_STREAM, 0)
	try("inet", unix.AF_INET, unix.SOCK_STREAM, 0)
	try("inet6", unix.AF_INET6, unix.SOCK_DGRAM, 0)
	try("netlink-route", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	try("netlink-diag", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG)
	try("netlink-uevent", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT)
	try("vsock", unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	try("packet", unix.AF_PACKET, unix.SOCK_RAW, 0)
	try("bluetooth", unix.AF_BLUETOOTH, unix.SOCK_STREAM, 0)
	try("alg", unix.AF_ALG, unix.SOCK_SEQPACKET, 0)
	pair := func(name string, family, typ int) {
		fds, err := unix.Socketpair(family, typ|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		report("socketpair-"+name, err)
	}
	pair("unix", unix.AF_UNIX, unix.SOCK_STREAM)
	pair("vsock", unix.AF_VSOCK, unix.SOCK_STREAM)
}

// fds lists the descriptors the process holds beyond 0-2.
func fds() {
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fmt.Printf("fd %s -> %s\n", e.Name(), target)
	}
}
