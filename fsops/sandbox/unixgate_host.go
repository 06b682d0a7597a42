package sandbox

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// The run host's side of the unix gate (unixgate.go): it answers each
// connect(2) of the run's processes.

// seccompNotif is struct seccomp_notif.
type seccompNotif struct {
	id    uint64
	pid   uint32 // the calling thread, in the run host's pid namespace
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp.
type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// seccompNotifAddfd is struct seccomp_notif_addfd.
type seccompNotifAddfd struct {
	id         uint64
	flags      uint32
	srcfd      uint32
	newfd      uint32
	newfdFlags uint32
}

// unixGate answers one run's connects.
type unixGate struct {
	listener *os.File
	UnixGateRules
	// The connector, started at the first connect that needs it: once
	// (startMu), its client and pidfd published in connector.
	startMu   sync.Mutex
	started   bool
	connector atomic.Pointer[gateConnector]
}

// gateConnector is the started connector: its client, its pidfd and pid.
type gateConnector struct {
	client *connectorClient
	pidfd  *os.File
	pid    int
}

// UnixGateRules are what a run's connects may reach.
type UnixGateRules struct {
	// Broker is the run's broker socket: a connect to it is handed to
	// Hand, with the host's end of the connection and the caller's pid.
	Broker string
	Hand   func(conn, pid int)
	// Writable are the places the run may write (canonical host paths):
	// a unix socket beneath one is the run's own to connect to.
	Writable []string
	// Network: the run holds the network grant, its inet connects are
	// made. Abstract: Landlock scopes abstract unix sockets (ABI 6), so
	// an abstract connect made inside the run stays inside it.
	Network, Abstract bool
	// Proxy, without Network, is the one inet address the run connects
	// to: the run host's egress proxy on the host's loopback.
	Proxy netip.AddrPort
	// StartConnector has the init start the connector and returns its
	// channel and pidfd (the caller's to close).
	StartConnector func() (ch, pidfd *os.File, err error)
	broker         unix.Stat_t
}

// ServeUnixGate answers, until every process of the run is gone, the
// connects of the processes under the gate whose listener the init sent,
// by rules: the broker, sockets beneath the writable places, abstract ones
// where Landlock scopes them and inet ones with the network grant, the
// last three made by the connector inside the run. Everything else is
// EACCES.
func ServeUnixGate(listener *os.File, rules UnixGateRules) error {
	st, err := fsops.Stat(rules.Broker)
	if err != nil {
		listener.Close()
		return err
	}
	rules.broker = st
	g := &unixGate{listener: listener, UnixGateRules: rules}
	go g.loop()
	return nil
}

// connectorClient is the connector, started at the first call; nil when
// it could not be (every connect it would make is then EACCES).
func (g *unixGate) connectorClient() *connectorClient {
	g.startMu.Lock()
	defer g.startMu.Unlock()
	if !g.started && g.StartConnector != nil {
		g.started = true
		ch, pidfd, err := g.StartConnector()
		if err != nil {
			return nil
		}
		pid := pidfdPid(pidfd)
		if pid <= 0 {
			ch.Close()
			pidfd.Close()
			return nil
		}
		g.connector.Store(&gateConnector{client: newConnectorClient(ch), pidfd: pidfd, pid: pid})
	}
	if c := g.connector.Load(); c != nil {
		return c.client
	}
	return nil
}

// fromConnector reports whether the notification, from a thread of
// process tgid, is a connect of the connector itself, to be let through
// to the kernel: the connector makes only the connects the gate decided
// on, with the address the gate copied, from memory no agent process can
// reach. The caller is one of
// its threads when the thread's process is the connector's pid, the
// thread still waits in this notification (so the pid read is its own),
// and the connector's pidfd says it has not exited (so that pid is still
// the connector's, not a process that took the number after it).
func (g *unixGate) fromConnector(n *seccompNotif, tgid int) bool {
	c := g.connector.Load()
	if c == nil || tgid != c.pid || !g.valid(n.id) {
		return false
	}
	return pidfdRunning(c.pidfd)
}

// pidfdPid is the pid of the process pidfd refers to (the Pid line of its
// fdinfo), 0 or -1 once it has exited and been reaped.
func pidfdPid(pidfd *os.File) int {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(int(pidfd.Fd())))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return pid
			}
		}
	}
	return -1
}

// pidfdRunning reports whether the process pidfd refers to has not
// exited: a pidfd polls readable once it has.
func pidfdRunning(pidfd *os.File) bool {
	running := false
	raw, err := pidfd.SyscallConn()
	if err != nil {
		return false
	}
	raw.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		running = err == nil && n == 0
	})
	return running
}

// loop receives the notifications. It ends when no process is left under
// the filter (the listener hangs up) or the listener fails.
func (g *unixGate) loop() {
	defer func() {
		// After the listener: no answer is sent once it is closed.
		if c := g.connector.Load(); c != nil {
			c.pidfd.Close()
		}
	}()
	defer g.listener.Close()
	fd := int(g.listener.Fd())
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if pfd[0].Revents&unix.POLLIN == 0 {
			return // POLLHUP: the run is over
		}
		var n seccompNotif
		if err := notifIoctl(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
			if err == unix.EINTR || err == unix.ENOENT {
				continue // ENOENT: the caller went away before it was taken
			}
			return
		}
		// Each in its own goroutine: a connect made for the caller may
		// block, and a path lookup may be slow.
		go g.answer(n)
	}
}

func notifIoctl(fd int, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

// answer decides one notification and sends the verdict: success (after
// the gate made the connection) or the errno.
func (g *unixGate) answer(n seccompNotif) {
	resp := seccompNotifResp{id: n.id}
	tgid, err := threadGroup(int(n.pid)) // the caller's process, read once
	switch {
	case n.nr != unix.SYS_CONNECT:
		resp.error = -int32(unix.EPERM)
	case err != nil:
		resp.error = -int32(unix.EACCES)
	case g.fromConnector(&n, tgid):
		resp.flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
	default:
		if errno := g.decide(&n, tgid); errno != 0 {
			resp.error = -int32(errno)
		}
	}
	notifIoctl(int(g.listener.Fd()), unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
}

// valid reports whether the notification is still pending: its caller is
// still in the system call, so the pid and its files are the caller's.
func (g *unixGate) valid(id uint64) bool {
	return notifIoctl(int(g.listener.Fd()), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id)) == nil
}

// decide carries out the connect the notification (a connect, from a
// thread of process tgid) asks for, or refuses it.
//
// long: one step per check, in the order the kernel's own connect makes
// them, each with the errno it would give.
func (g *unixGate) decide(n *seccompNotif, tgid int) syscall.Errno {
	tid := int(n.pid)
	pidfd, err := unix.PidfdOpen(tgid, 0)
	if err != nil {
		return unix.EACCES
	}
	defer unix.Close(pidfd)
	mem, err := os.Open("/proc/" + strconv.Itoa(tid) + "/mem")
	if err != nil {
		return unix.EACCES
	}
	defer mem.Close()
	// Both opened, and the caller still waits: they are its own.
	if !g.valid(n.id) {
		return unix.ENOENT
	}
	fdnum := int(int32(n.args[0]))
	sock, err := unix.PidfdGetfd(pidfd, fdnum, 0)
	if err != nil {
		if err == unix.EBADF {
			return unix.EBADF
		}
		return unix.EACCES
	}
	defer unix.Close(sock)
	addr, errno := readSockaddr(mem, n.args[1], n.args[2])
	if errno != 0 {
		return errno
	}
	domain, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return unix.ENOTSOCK
	}
	if domain != unix.AF_UNIX {
		if !g.Network && !(g.Proxy.IsValid() && inet4Addr(addr) == g.Proxy) {
			return unix.EACCES
		}
		return g.connectorClient().connect(sock, addr, -1)
	}
	if binary.LittleEndian.Uint16(addr) != unix.AF_UNIX || len(addr) < 3 {
		return unix.EINVAL // another family, or no name
	}
	if addr[2] == 0 {
		if !g.Abstract {
			return unix.EACCES
		}
		return g.connectorClient().connect(sock, addr, -1)
	}
	target := openUnixTarget(tid, addr[2:])
	if target < 0 {
		return unix.EACCES
	}
	defer unix.Close(target)
	var st unix.Stat_t
	if unix.Fstat(target, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return unix.EACCES
	}
	if st.Dev == g.broker.Dev && st.Ino == g.broker.Ino {
		if typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_SEQPACKET {
			return unix.EPROTOTYPE // the broker's socket is a seqpacket one
		}
		return g.handOver(n, tid, tgid, sock, fdnum)
	}
	if !g.writable(target) {
		return unix.EACCES
	}
	return g.connectorClient().connect(sock, nil, target)
}

// writable reports whether the file target is an O_PATH descriptor of
// lies beneath one of the places the run may write (its path as the
// kernel has it now; the agent cannot move a file in from elsewhere, as
// Landlock refuses it the rename or link).
func (g *unixGate) writable(target int) bool {
	p, err := os.Readlink(fsops.FDPath(target))
	if err != nil {
		return false
	}
	for _, w := range g.Writable {
		if p == w || strings.HasPrefix(p, strings.TrimSuffix(w, "/")+"/") {
			return true
		}
	}
	return false
}

// inet4Addr is the AF_INET address a sockaddr names, or the zero value.
func inet4Addr(addr []byte) netip.AddrPort {
	if len(addr) < 8 || binary.LittleEndian.Uint16(addr) != unix.AF_INET {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(addr[4:8])), binary.BigEndian.Uint16(addr[2:4]))
}

// threadGroup is the process (thread group) thread tid belongs to.
func threadGroup(tid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, unix.ESRCH
}

// readSockaddr copies the caller's address once: every decision is made
// on this copy, never on the caller's memory again.
func readSockaddr(mem *os.File, ptr, length uint64) ([]byte, syscall.Errno) {
	size := uint32(length)      // socklen_t
	if size < 2 || size > 128 { // 128: sizeof(struct sockaddr_storage)
		return nil, unix.EINVAL
	}
	addr := make([]byte, size)
	if n, err := mem.ReadAt(addr, int64(ptr)); err != nil || n != len(addr) {
		return nil, unix.EFAULT
	}
	return addr, 0
}

// connectRaw connects sock, the caller's own socket, to addr: the
// caller's connect made by the gate, so the address it connects to is the
// one decided on.
func connectRaw(sock int, addr []byte) syscall.Errno {
	_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(sock), uintptr(unsafe.Pointer(&addr[0])), uintptr(len(addr)))
	return errno
}

// openUnixTarget opens (O_PATH) the file the unix socket name leads to,
// looked up as the caller would (relative to its directory, its
// /proc/self), or returns -1. A lookup gone wrong can only refuse or
// find a file the rules then judge.
func openUnixTarget(tid int, name []byte) int {
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	path := string(name)
	proc := "/proc/" + strconv.Itoa(tid)
	switch {
	case !strings.HasPrefix(path, "/"):
		path = proc + "/cwd/" + path
	case path == "/proc/self" || strings.HasPrefix(path, "/proc/self/"):
		path = proc + strings.TrimPrefix(path, "/proc/self")
	case path == "/proc/thread-self" || strings.HasPrefix(path, "/proc/thread-self/"):
		path = proc + strings.TrimPrefix(path, "/proc/thread-self")
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// handOver connects the caller to the broker: a connected pair, the
// host's end to the broker as a connection from the caller, the other in
// place of the caller's socket, with its non-blocking and close-on-exec
// flags.
func (g *unixGate) handOver(n *seccompNotif, tid, tgid, sock, fdnum int) syscall.Errno {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return unix.ENOBUFS
	}
	if fl, err := unix.FcntlInt(uintptr(sock), unix.F_GETFL, 0); err == nil && fl&unix.O_NONBLOCK != 0 {
		unix.SetNonblock(pair[1], true)
	}
	add := seccompNotifAddfd{id: n.id, flags: unix.SECCOMP_ADDFD_FLAG_SETFD, srcfd: uint32(pair[1]), newfd: uint32(fdnum)}
	if fdCloseOnExec(tid, fdnum) {
		add.newfdFlags = unix.O_CLOEXEC
	}
	err = notifIoctl(int(g.listener.Fd()), unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&add))
	unix.Close(pair[1])
	if err != nil {
		unix.Close(pair[0])
		return unix.ENOENT
	}
	g.Hand(pair[0], tgid)
	return 0
}

// fdCloseOnExec reports whether the caller's descriptor fdnum is
// close-on-exec (the flags line of /proc/TID/fdinfo, in octal).
func fdCloseOnExec(tid, fdnum int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/fdinfo/" + strconv.Itoa(fdnum))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err != nil || flags&unix.O_CLOEXEC != 0
		}
	}
	return true
}
