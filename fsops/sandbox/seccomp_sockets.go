package sandbox

import (
	"strings"

	"golang.org/x/sys/unix"
)

// networkFamilies are the socket families a run with the network grant
// opens whatever the protocol; AF_NETLINK is allowed besides them with
// NETLINK_ROUTE only (SeccompOptions.NoNetwork says why).
var networkFamilies = []struct {
	name   string
	family uint32
}{
	{"AF_UNIX", unix.AF_UNIX},
	{"AF_INET", unix.AF_INET},
	{"AF_INET6", unix.AF_INET6},
}

// SocketFamilies names, for the manual and /mnt/proc/policy, the socket
// families socket(2) and socketpair(2) make under the filter: AF_UNIX
// alone without the network grant.
func SocketFamilies(network bool) string {
	if !network {
		return "AF_UNIX"
	}
	var names []string
	for _, f := range networkFamilies {
		names = append(names, f.name)
	}
	return strings.Join(append(names, "AF_NETLINK (NETLINK_ROUTE)"), ", ")
}

// socketFamilyChecks judges socket(2) and socketpair(2) (the filter has
// jumped here for them) by their family, and netlink sockets by their
// protocol, going to allow or deny. The family is arg 0, an int: low word
// only. (Neither architecture has socketcall(2), the multiplexer that
// would hide the family in memory; i386's is a foreign call, killed
// before.) The protocol is arg 2, an int as well.
func socketFamilyChecks(a *bpfAssembler, opts SeccompOptions, allow, deny bpfLabel) {
	const checkNetlink, checkTCP bpfLabel = "netlink", "tcp"
	a.load(seccompDataArgs + 8*0)
	if opts.NoNetwork {
		a.jumpIfEqual(unix.AF_UNIX, allow, deny)
		return
	}
	if opts.TCPOnly {
		// The type is arg 1's low four bits (SOCK_NONBLOCK and
		// SOCK_CLOEXEC above them), the protocol arg 2.
		a.jumpIfEqual(unix.AF_UNIX, allow, bpfNext)
		a.jumpIfEqual(unix.AF_INET, checkTCP, bpfNext)
		a.jumpIfEqual(unix.AF_INET6, checkTCP, deny)
		a.mark(checkTCP)
		a.load(seccompDataArgs + 8*1)
		a.and(0xf)
		a.jumpIfEqual(unix.SOCK_STREAM, bpfNext, deny)
		a.load(seccompDataArgs + 8*2)
		a.jumpIfEqual(0, allow, bpfNext)
		a.jumpIfEqual(unix.IPPROTO_TCP, allow, deny)
		return
	}
	for _, family := range networkFamilies {
		a.jumpIfEqual(family.family, allow, bpfNext)
	}
	a.jumpIfEqual(unix.AF_NETLINK, checkNetlink, deny)
	a.mark(checkNetlink)
	a.load(seccompDataArgs + 8*2)
	a.jumpIfEqual(unix.NETLINK_ROUTE, allow, deny)
}

// A TCP Fast Open send (sendto, sendmsg or sendmmsg with MSG_FASTOPEN on
// an unconnected TCP socket) connects without connect(2): Landlock's
// port rule is not asked (the kernel this was written on let it through)
// and neither is the unix gate. Under TCPOnly the flag is refused (EPERM);
// a program falls back to connect. The flags are an int: low word only.
const (
	checkSendto  bpfLabel = "sendto"  // flags in arg 3 (sendto, sendmmsg)
	checkSendmsg bpfLabel = "sendmsg" // flags in arg 2
)

// fastOpenDispatch jumps the send calls to their checks under TCPOnly.
func fastOpenDispatch(a *bpfAssembler, opts SeccompOptions) {
	if !opts.TCPOnly || opts.NoNetwork {
		return
	}
	a.jumpIfEqual(unix.SYS_SENDTO, checkSendto, bpfNext)
	a.jumpIfEqual(unix.SYS_SENDMMSG, checkSendto, bpfNext)
	a.jumpIfEqual(unix.SYS_SENDMSG, checkSendmsg, bpfNext)
}

// fastOpenChecks are those checks: MSG_FASTOPEN set is denied.
func fastOpenChecks(a *bpfAssembler, opts SeccompOptions, allow, deny bpfLabel) {
	if !opts.TCPOnly || opts.NoNetwork {
		return
	}
	a.mark(checkSendto)
	a.load(seccompDataArgs + 8*3)
	a.jumpIfAnySet(unix.MSG_FASTOPEN, deny, allow)
	a.mark(checkSendmsg)
	a.load(seccompDataArgs + 8*2)
	a.jumpIfAnySet(unix.MSG_FASTOPEN, deny, allow)
}
