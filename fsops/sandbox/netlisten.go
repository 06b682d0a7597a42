package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/policy/sandboxplan"
)

// The egress listeners of a namespace run (DESIGN §17, sandboxplan.Egress):
// the sandbox's init binds them in the run's network namespace, its
// loopback up, before it drops its privileges (ports below 1024 need
// CAP_NET_BIND_SERVICE there), and hands them to the run host once, on
// the egress channel, as one message: a line per descriptor naming its
// role, the descriptors attached in the same order. The run host then
// accepts on them itself: no connection passes through the init, and the
// init keeps no copy. A run host that never reads them leaves the
// listeners with the init's exit, and the program's connections refused.

// Roles of the egress descriptors, one a line of the message.
const (
	egressProxy   = "proxy"
	egressDNSTCP  = "dns-tcp"
	egressDNSUDP  = "dns-udp"
	egressForward = "forward"
	egressFailed  = "failed" // a forwarder that could not listen: "failed ADDR: why", no descriptor
)

// maxEgressFDs bounds the descriptors of the egress message.
const maxEgressFDs = sandboxplan.MaxEgressForwards + 3

// netChannel is the init's end of the egress channel, when the run host
// handed one over (handoffNet).
var netChannel *os.File

// NewEgressChannel makes the egress channel: the run host's end (non-
// blocking, so that closing it ends a ReceiveEgress) and the init's, which
// SetEgressChannel hands over.
func NewEgressChannel() (host, init *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "egress-host"), os.NewFile(uintptr(fds[1]), "egress-init"), nil
}

// SetEgressChannel hands over the init's end of the egress channel.
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
	}{{egressProxy, e.Proxy, false}, {egressDNSTCP, e.DNS, false}, {egressDNSUDP, e.DNS, true}} {
		fd, err := egressSocket(l.addr, l.udp)
		if err != nil {
			return &Error{"listening for the egress proxy at " + l.addr, err}
		}
		fds, roles = append(fds, fd), append(roles, l.role)
	}
	for _, addr := range e.Forward {
		fd, err := egressSocket(addr, false)
		if err != nil {
			roles = append(roles, egressFailed+" "+addr+": "+err.Error())
			continue
		}
		fds, roles = append(fds, fd), append(roles, egressForward)
	}
	msg := []byte(strings.Join(roles, "\n"))
	if err := unix.Sendmsg(int(ch.Fd()), msg, unix.UnixRights(fds...), nil, 0); err != nil {
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

// EgressListeners are what the init handed over: the proxy's listener,
// the DNS stub's sockets, the forwarders (each accepting for the
// addresses the stub gives names, at one port), and the forwarders that
// could not listen, each "ADDR: why".
type EgressListeners struct {
	Proxy   net.Listener
	DNSTCP  net.Listener
	DNSUDP  net.PacketConn
	Forward []net.Listener
	Failed  []string
}

// Close closes every listener.
func (l *EgressListeners) Close() {
	for _, c := range append([]net.Listener{l.Proxy, l.DNSTCP}, l.Forward...) {
		if c != nil {
			c.Close()
		}
	}
	if l.DNSUDP != nil {
		l.DNSUDP.Close()
	}
}

// ReceiveEgress waits for the init's egress message on the run host's end
// of the channel and returns its listeners. It returns an error when the
// init ends without sending it, or when host is closed.
func ReceiveEgress(host *os.File) (*EgressListeners, error) {
	rc, err := host.SyscallConn()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(maxEgressFDs*4))
	var n, oobn, flags int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, flags, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	var files []*os.File
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for i := range msgs {
			if fds, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				for _, fd := range fds {
					files = append(files, os.NewFile(uintptr(fd), "egress"))
				}
			}
		}
	}
	defer func() {
		for _, f := range files {
			f.Close() // the listeners made of them hold duplicates
		}
	}()
	if n == 0 && oobn == 0 {
		return nil, errors.New("the sandbox's init ended without its egress listeners")
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return nil, errors.New("the egress message was truncated")
	}
	return egressOf(strings.Split(string(buf[:n]), "\n"), files)
}

// egressOf makes the listeners of the message's roles and descriptors,
// which must match one for one.
func egressOf(roles []string, files []*os.File) (*EgressListeners, error) {
	l := &EgressListeners{}
	next := 0
	fail := func(err error) (*EgressListeners, error) {
		l.Close()
		return nil, fmt.Errorf("the egress listeners: %w", err)
	}
	for _, role := range roles {
		if why, ok := strings.CutPrefix(role, egressFailed+" "); ok {
			l.Failed = append(l.Failed, why)
			continue
		}
		if next >= len(files) {
			return fail(fmt.Errorf("no descriptor for %q", role))
		}
		f := files[next]
		next++
		var err error
		switch role {
		case egressDNSUDP:
			l.DNSUDP, err = net.FilePacketConn(f)
		case egressProxy, egressDNSTCP, egressForward:
			var ln net.Listener
			if ln, err = net.FileListener(f); err == nil {
				switch role {
				case egressProxy:
					l.Proxy = ln
				case egressDNSTCP:
					l.DNSTCP = ln
				default:
					l.Forward = append(l.Forward, ln)
				}
			}
		default:
			err = fmt.Errorf("unknown role %q", role)
		}
		if err != nil {
			return fail(err)
		}
	}
	if next != len(files) || l.Proxy == nil || l.DNSTCP == nil || l.DNSUDP == nil {
		return fail(fmt.Errorf("%d descriptors for %d roles, or the proxy or DNS missing", len(files), len(roles)))
	}
	return l, nil
}
