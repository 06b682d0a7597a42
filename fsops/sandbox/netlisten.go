package sandbox

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"ctx/fsops/netproxy"
	"ctx/policy/sandboxplan"
)

// The egress listeners of a namespace run (DESIGN §17, sandboxplan.Egress):
// the sandbox's init binds them in the run's network namespace, its
// loopback up, before it drops its privileges (ports below 1024 need
// CAP_NET_BIND_SERVICE there), and hands them to the run host once, on
// the egress channel (netproxy.SendListeners, ReceiveListeners). The run
// host then accepts on them itself: no connection passes through the
// init, and the init keeps no copy. A run host that never reads them
// leaves the listeners with the init's exit, and the program's
// connections refused.

// netChannel is the init's end of the egress channel, when the run host
// handed one over (handoffNet).
var netChannel *os.File

// SetEgressChannel hands over the init's end of the egress channel
// (netproxy.NewEgressChannel).
func (s *Sandbox) SetEgressChannel(f *os.File) { s.pass[3] = f }

// listenEgress binds the plan's egress listeners and sends them to the
// run host. A run whose plan has no namespace egress closes the channel
// unused.
func listenEgress(plan *sandboxplan.Plan) error {
	ch := netChannel
	netChannel = nil
	e := plan.Egress
	if e == nil || e.ConnectPort != 0 || !plan.Namespaces.Net {
		if ch != nil {
			ch.Close()
		}
		return nil
	}
	if ch == nil {
		return &Error{"listening for the egress proxy", errors.New("the run host handed over no egress channel")}
	}
	defer ch.Close()
	var roles []string
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, l := range []struct {
		role, addr string
		udp        bool
	}{{netproxy.RoleProxy, e.Proxy, false}, {netproxy.RoleDNSTCP, e.DNS, false}, {netproxy.RoleDNSUDP, e.DNS, true}} {
		fd, err := egressSocket(l.addr, l.udp)
		if err != nil {
			return &Error{"listening for the egress proxy at " + l.addr, err}
		}
		fds, roles = append(fds, fd), append(roles, l.role)
	}
	for _, addr := range e.Forward {
		fd, err := egressSocket(addr, false)
		if err != nil {
			roles = append(roles, netproxy.RoleFailed+" "+addr+": "+err.Error())
			continue
		}
		fds, roles = append(fds, fd), append(roles, netproxy.RoleForward)
	}
	if err := netproxy.SendListeners(ch, roles, fds); err != nil {
		return &Error{"handing the egress listeners to the run host", err}
	}
	return nil
}

// egressSocket binds a listening TCP socket (or a UDP one) at addr, an
// IPv4 address and port.
func egressSocket(addr string, udp bool) (int, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return -1, fmt.Errorf("%q is not an IPv4 address and port", addr)
	}
	typ := unix.SOCK_STREAM
	if udp {
		typ = unix.SOCK_DGRAM
	}
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	sa := &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if !udp {
		if err := unix.Listen(fd, 512); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}
