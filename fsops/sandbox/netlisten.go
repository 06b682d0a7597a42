package sandbox

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
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
// connections refused. A port granted during the run gets its forwarder
// later, one at a time, on the run host's order (listenFor).

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
	if !namespaceEgress(plan) {
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
	if !udp {
		// A forwarder granted during the run may take a port whose last
		// connections linger (TIME_WAIT, or open on the 127.0.0.1
		// forwarder it replaces); never one a socket listens on.
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
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

// namespaceEgress reports whether the plan's egress listens in the run's
// own network namespace (userns, uid), never the host's.
func namespaceEgress(plan *sandboxplan.Plan) bool {
	e := plan.Egress
	return e != nil && e.ConnectPort == 0 && plan.Namespaces.Net
}

// forwardsListened counts the forwarders listenFor bound: with the
// start's, never more than sandboxplan.MaxEgressForwards.
var forwardsListened int

// listenFor binds, on the run host's order, a forwarder's listener for a
// port granted during the run, in the run's network namespace, and
// replies with it, or with why not: the address must be one a forwarder
// may have (IPv4 loopback or the wildcard address, a port other than the
// DNS stub's), the run's namespace its own, and the bound not reached. A
// port a program of the run already holds is refused by the kernel
// (EADDRINUSE), and only refused: the init binds nothing else instead.
//
// A port below 1024 binds as at the start: dropPrivileges empties the
// bounding, ambient and inheritable sets, which no child then gains from,
// and leaves this thread's effective capabilities, CAP_NET_BIND_SERVICE in
// the run's namespace among them. So the namespace's
// ip_unprivileged_port_start stays as it is, and the program binds no low
// port of its own.
func (b *initBroker) listenFor(o broker.Order) {
	rep := broker.InitReport{Op: broker.OpListen, ID: o.ID}
	err := sandboxplan.ValidForward(o.Path)
	switch {
	case !namespaceEgress(b.plan):
		rep.Error = "the run has no network namespace of its own"
	case err != nil:
		rep.Error = err.Error()
	case forwardsListened+len(b.plan.Egress.Forward) >= sandboxplan.MaxEgressForwards:
		rep.Error = fmt.Sprintf("more than %d forwarded ports", sandboxplan.MaxEgressForwards)
	}
	if rep.Error != "" {
		b.report(rep)
		return
	}
	fd, err := egressSocket(o.Path, false)
	if err != nil {
		rep.Error = err.Error()
		b.report(rep)
		return
	}
	defer unix.Close(fd)
	forwardsListened++
	broker.Send(int(b.ch.Fd()), rep, []int{fd})
}
