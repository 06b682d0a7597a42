package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
	"ctx/policy/sandboxplan"
)

// The unix gate keeps an iso landlock run off the host's pathname unix
// sockets where Landlock cannot (before ABI 9, LANDLOCK_ACCESS_FS_RESOLVE_UNIX):
// without it an agent connects to any socket its uid may, the person's
// ssh-agent and gpg-agent, or the user's D-Bus bus, through which
// `systemd-run --user` starts a program outside every wall.
//
// A second seccomp filter, installed by the sandbox init after the agent
// filter, hands every connect(2) of the run to the run host
// (SECCOMP_RET_USER_NOTIF), and makes AF_UNIX sockets of the stream and
// seqpacket types only: a datagram socket can send to a named socket
// with sendto or sendmsg, whose address sendmsg keeps in memory no filter
// can read, while stream and seqpacket sockets ignore or refuse an
// address there. The run host (ServeUnixGate) decides each connect:
//
//   - The socket (taken with pidfd_getfd, so its family is what the
//     kernel recorded, not what the agent claims) is not AF_UNIX: the run
//     host connects it itself to its own copy of the address, so an
//     address or descriptor the agent changes after the check changes
//     nothing. The result is the agent's.
//   - AF_UNIX, and the address (copied once from the agent's memory)
//     leads to the run's broker socket: the run host makes a connected
//     pair, hands one end to its broker as a connection from that pid,
//     and puts the other at the agent's descriptor
//     (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SETFD): the
//     connect succeeds, with nothing connected by the agent's own hand.
//   - Anything else, abstract names included: EACCES, as Landlock ABI 9
//     answers. Nothing is ever let through to the kernel to judge again
//     (SECCOMP_USER_NOTIF_FLAG_CONTINUE), so no change of memory or of
//     the descriptor table after the check can widen it.
//
// When the run host is gone the kernel answers every connect ENOSYS: the
// gate fails closed.

// unixGateFilter is the gate's filter for this build's architecture.
func unixGateFilter() ([]unix.SockFilter, error) {
	arch, err := nativeSeccompArch()
	if err != nil {
		return nil, err
	}
	const (
		allow       bpfLabel = "allow"
		deny        bpfLabel = "deny"
		notify      bpfLabel = "notify"
		checkSocket bpfLabel = "socket"
	)
	var a bpfAssembler
	a.load(seccompDataArch)
	// A foreign architecture is the agent filter's to kill.
	a.jumpIfEqual(arch.auditArch, bpfNext, allow)
	a.load(seccompDataNr)
	a.jumpIfEqual(unix.SYS_CONNECT, notify, bpfNext)
	a.jumpIfEqual(unix.SYS_SOCKET, checkSocket, bpfNext)
	a.jumpIfEqual(unix.SYS_SOCKETPAIR, checkSocket, allow)
	a.mark(checkSocket)
	a.load(seccompDataArgs + 8*0)
	a.jumpIfEqual(unix.AF_UNIX, bpfNext, allow)
	// The type is arg 1's low four bits (SOCK_NONBLOCK and SOCK_CLOEXEC
	// above them); SOCK_RAW is a datagram socket for AF_UNIX.
	a.load(seccompDataArgs + 8*1)
	a.and(0xf)
	a.jumpIfEqual(unix.SOCK_STREAM, allow, bpfNext)
	a.jumpIfEqual(unix.SOCK_SEQPACKET, allow, deny)
	a.mark(deny)
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.mark(notify)
	a.ret(unix.SECCOMP_RET_USER_NOTIF)
	a.mark(allow)
	a.ret(unix.SECCOMP_RET_ALLOW)
	return a.assemble()
}

// installUnixGate installs the gate's filter on every thread of the
// process (no_new_privs is set) and returns its listener, the descriptor
// the run host answers the notifications on.
func installUnixGate() (*os.File, error) {
	filter, err := unixGateFilter()
	if err != nil {
		return nil, fmt.Errorf("building the unix gate: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// TSYNC_ESRCH: a thread that cannot be synchronized is an error, not
	// its id, which would be ambiguous with the listener's descriptor.
	flags := unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH | unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, uintptr(flags), uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return nil, fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER): %w", errno)
	}
	return os.NewFile(fd, "unix-gate"), nil
}

// startUnixGate installs the gate and hands its listener to the run host
// on the broker's channel; the init keeps no copy (whoever holds the
// listener decides the run's connects). The connector is not started
// here: most runs never need it, and it is a process of its own, so the
// run host asks for it at the first connect it must make
// (startConnectorFor, unixgate_connector.go).
func startUnixGate(plan *sandboxplan.Plan) error {
	if brokerChannel == nil || plan.Worker == "" {
		return errors.New("no broker channel to hand the gate to")
	}
	listener, err := installUnixGate()
	if err != nil {
		return err
	}
	defer listener.Close()
	gateInstalled = true
	return broker.Send(int(brokerChannel.Fd()), broker.InitReport{Op: broker.OpUnixGate}, []int{int(listener.Fd())})
}

// gateInstalled: this init put the gate on its threads, so a connector
// it starts is gated too, and the run host tells its connects apart.
var gateInstalled bool

// and is BPF_ALU AND: the accumulator keeps only mask's bits.
func (a *bpfAssembler) and(mask uint32) {
	a.emit(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, mask)
}
