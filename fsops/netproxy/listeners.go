package netproxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The egress listeners of a namespace run travel from the sandbox's init,
// which binds them in the run's network namespace (fsops/sandbox/
// netlisten.go), to the run host, once, on the egress channel: one
// message, a line per descriptor naming its role, the descriptors
// attached in the same order. The run host then accepts on them itself.

// Roles of the egress descriptors, one a line of the message.
const (
	RoleProxy   = "proxy"
	RoleDNSTCP  = "dns-tcp"
	RoleDNSUDP  = "dns-udp"
	RoleForward = "forward"
	// RoleFailed is a forwarder that could not listen: "failed ADDR:
	// why", with no descriptor.
	RoleFailed = "failed"
)

// MaxListeners bounds the descriptors of the egress message.
const MaxListeners = 128

// NewEgressChannel makes the egress channel: the run host's end (non-
// blocking, so that closing it ends a ReceiveEgress) and the init's.
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

// SendListeners sends the roles and their descriptors on the init's end.
func SendListeners(ch *os.File, roles []string, fds []int) error {
	if len(fds) > MaxListeners {
		return fmt.Errorf("%d egress descriptors (limit %d)", len(fds), MaxListeners)
	}
	return unix.Sendmsg(int(ch.Fd()), []byte(strings.Join(roles, "\n")), unix.UnixRights(fds...), nil, 0)
}

// Listeners are what the init handed over: the proxy's listener, the DNS
// stub's sockets, the forwarders (each accepting for the addresses the
// stub gives names, at one port), and the forwarders that could not
// listen, each "ADDR: why".
type Listeners struct {
	Proxy   net.Listener
	DNSTCP  net.Listener
	DNSUDP  net.PacketConn
	Forward []net.Listener
	Failed  []string
}

// Close closes every listener.
func (l *Listeners) Close() {
	for _, c := range append([]net.Listener{l.Proxy, l.DNSTCP}, l.Forward...) {
		if c != nil {
			c.Close()
		}
	}
	if l.DNSUDP != nil {
		l.DNSUDP.Close()
	}
}

// ReceiveListeners waits for the init's egress message on the run host's
// end of the channel and returns its listeners. It returns an error when
// the init ends without sending it, or when host is closed.
func ReceiveListeners(host *os.File) (*Listeners, error) {
	rc, err := host.SyscallConn()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(MaxListeners*4))
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
	return listenersOf(strings.Split(string(buf[:n]), "\n"), files)
}

// listenersOf makes the listeners of the message's roles and descriptors,
// which must match one for one.
func listenersOf(roles []string, files []*os.File) (*Listeners, error) {
	l := &Listeners{}
	next := 0
	fail := func(err error) (*Listeners, error) {
		l.Close()
		return nil, fmt.Errorf("the egress listeners: %w", err)
	}
	for _, role := range roles {
		if why, ok := strings.CutPrefix(role, RoleFailed+" "); ok {
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
		case RoleDNSUDP:
			l.DNSUDP, err = net.FilePacketConn(f)
		case RoleProxy, RoleDNSTCP, RoleForward:
			var ln net.Listener
			if ln, err = net.FileListener(f); err == nil {
				switch role {
				case RoleProxy:
					l.Proxy = ln
				case RoleDNSTCP:
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
