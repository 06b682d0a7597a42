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
	const checkNetlink bpfLabel = "netlink"
	a.load(seccompDataArgs + 8*0)
	if opts.NoNetwork {
		a.jumpIfEqual(unix.AF_UNIX, allow, deny)
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
