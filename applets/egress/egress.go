// Package egress is a run's network by name (DESIGN §17), the run host's
// side: its egress proxy (fsops/netproxy), the DNS stub and the
// forwarders, served on the listeners the sandbox's init hands over
// (fsops/sandbox/netlisten.go) or on the host's loopback, each connection
// decided on the agent's policy as the run host reads it now, recorded as
// one net.connect event, and a refusal told on the run's standard error
// with the grant that would allow it. The run host (applets/runhost,
// network.go) gives it what it decides and records with (Host).
package egress

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ctx/applets/authority"
	"ctx/fsops"
	"ctx/fsops/netproxy"
	"ctx/fsops/sandbox"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// Mode is how the run reaches its proxy.
type Mode string

const (
	// Namespace: the init's listeners in the run's network namespace
	// (userns, uid).
	Namespace Mode = "namespace"
	// Landlock: the host's loopback, the one port Landlock allows.
	Landlock Mode = "landlock"
	// Shared: the host's loopback, nothing enforced (iso shared).
	Shared Mode = "shared"
)

// Host is what the run host lends its egress.
type Host struct {
	Root  fsops.Root
	Agent string // the agent's name, for the fix lines
	// Generation is the count of policy changes the run host's watch
	// has seen, and whether a watch holds: without one every decision
	// reads the agent's policy afresh, with one after each change.
	Generation func() (gen uint64, watched bool)
	// Reserve reserves room for one more connection's record (on top of
	// those InFlight counts), or says why it cannot.
	Reserve func() error
	// Record writes one event; ran marks a connection that was made,
	// whose record was promised.
	Record         func(ev fsops.Event, ran bool) error
	Warnf          func(format string, args ...any)
	BudgetExceeded func(key, detail string)
	// Listen asks the sandbox's init for a forwarder's listener at addr,
	// order id (Namespace); its answer comes to Listened.
	Listen func(id uint64, addr string) error
	// Changed says the run's /mnt/proc/policy lines changed (a forwarder
	// added during the run): the run host rewrites the file.
	Changed func()
}

// Run is one run's egress.
type Run struct {
	h      Host
	mode   Mode
	egress *sandboxplan.Egress
	proxy  *netproxy.Proxy
	book   *netproxy.AddressBook
	stub   *netproxy.DNSStub
	// skipped are the granted ports that got no forwarder, each with why.
	skipped []string

	grantsMu  sync.Mutex
	grants    *policy.NetworkGrants // the last reading of the agent's policy
	grantsGen uint64                // the generation it was read at

	hostEnd, initEnd *os.File     // the egress channel (Namespace)
	hostListener     net.Listener // the proxy's listener on the host (Landlock, Shared)

	mu        sync.Mutex
	listeners *netproxy.Listeners
	closed    bool
	served    sync.WaitGroup // connections being served
	// inFlight counts connections between their acceptance and their
	// record.
	inFlight atomic.Int64
	kick     chan struct{} // a policy change to revalidate open relays on
	done     chan struct{} // closed with the run's egress
	warn     refusalWarner
	fw       forwards // the forwarders, those of the start and since (forwards.go)
}

// Open starts a run's egress in mode, its namespace listeners planned
// from the grants at the start, its budgets net_bytes and
// net_connections (0: unlimited). A Namespace run's listeners come once
// the init has the channel (InitEnd) and sends them.
func Open(mode Mode, start *policy.NetworkGrants, budget netproxy.Budget, h Host) (*Run, error) {
	n := &Run{h: h, mode: mode, grants: start, kick: make(chan struct{}, 1), done: make(chan struct{})}
	book, err := netproxy.NewAddressBook(netip.MustParsePrefix(sandboxplan.EgressBook), 4096)
	if err != nil {
		return nil, err
	}
	book.Bind("localhost", netip.MustParseAddr("127.0.0.1"))
	n.book = book
	n.proxy = netproxy.New(netproxy.Config{Decide: n.decide, Resolver: net.DefaultResolver, Report: n.report, Budget: budget})
	n.stub = &netproxy.DNSStub{Answer: book.Answerer(n.nameGranted), Refused: n.dnsRefused}
	go n.revalidateOnKick()
	if mode == Namespace {
		n.egress, n.skipped = sandboxplan.NamespaceEgress(start)
		if n.hostEnd, n.initEnd, err = netproxy.NewEgressChannel(); err != nil {
			n.Close()
			return nil, fmt.Errorf("the egress channel: %v", err)
		}
		go n.receive()
		return n, nil
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("the egress proxy's listener: %v", err)
	}
	n.hostListener = l
	n.egress = &sandboxplan.Egress{Proxy: l.Addr().String()}
	if mode == Landlock {
		n.egress.ConnectPort = uint16(l.Addr().(*net.TCPAddr).Port)
	} else {
		h.Warnf("%s: iso shared: the network grants are NOT enforced: the proxy variables name the run host's proxy, which decides and records what goes through it; a program that ignores them reaches whatever the host does", h.Agent)
	}
	n.serve(func(c net.Conn) { n.proxy.ServeConn(c) }, l)
	return n, nil
}

// Mode is the run's mode.
func (n *Run) Mode() Mode { return n.mode }

// Egress is what the proxy variables name.
func (n *Run) Egress() *sandboxplan.Egress { return n.egress }

// PlanEgress is what the sandbox's plan carries: the namespace's
// listeners, or iso landlock's one port; nil without egress or a plan.
func (n *Run) PlanEgress() *sandboxplan.Egress {
	if n == nil || n.mode == Shared {
		return nil
	}
	return n.egress
}

// LandlockProxy is the address an iso landlock run connects to, the one
// its unix gate lets through; the zero value in any other mode.
func (n *Run) LandlockProxy() netip.AddrPort {
	if n == nil || n.mode != Landlock {
		return netip.AddrPort{}
	}
	return netip.MustParseAddrPort(n.egress.Proxy)
}

// InitEnd is the init's end of the egress channel (Namespace), for the
// sandbox's handoff; nil once SandboxStarted.
func (n *Run) InitEnd() *os.File { return n.initEnd }

// InFlight counts the connections whose records are yet to be written.
func (n *Run) InFlight() int64 { return n.inFlight.Load() }

// receive takes the init's listeners and serves them until the run ends.
func (n *Run) receive() {
	l, err := netproxy.ReceiveListeners(n.hostEnd)
	n.mu.Lock()
	closed := n.closed
	if err == nil && !closed {
		n.listeners = l
	}
	n.mu.Unlock()
	switch {
	case err != nil && !closed:
		n.h.Warnf("%s: network: %v; the run has no network", n.h.Agent, err)
		return
	case err != nil:
		return
	case closed:
		l.Close()
		return
	}
	for _, why := range l.Failed {
		n.h.Warnf("%s: network: no forwarder at %s (reached through the proxy variables only)", n.h.Agent, why)
	}
	n.serve(func(c net.Conn) { n.proxy.ServeConn(c) }, l.Proxy)
	for _, f := range l.Forward {
		n.serve(func(c net.Conn) { n.proxy.ServeForward(c, n.book) }, f)
	}
	go n.stub.ServeUDP(l.DNSUDP)
	go n.stub.ServeTCP(l.DNSTCP)
	n.startForwards(l.Forward)
}

// serve accepts on l until it is closed, serving each connection with
// handle; Close waits for those being served.
func (n *Run) serve(handle func(net.Conn), l net.Listener) {
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue
				}
				return
			}
			n.served.Add(1)
			n.inFlight.Add(1)
			go func() {
				defer n.served.Done()
				defer n.inFlight.Add(-1)
				handle(c)
			}()
		}
	}()
}

// SandboxStarted drops the run host's copy of the init's end of the
// egress channel: the init holds its own, and its end is then seen.
func (n *Run) SandboxStarted() {
	if n != nil && n.initEnd != nil {
		n.initEnd.Close()
		n.initEnd = nil
	}
}

// Close ends the run's egress: no new connection, open relays closed,
// and their records written before Close returns (bounded).
func (n *Run) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	l := n.listeners
	close(n.done)
	n.mu.Unlock()
	if l != nil {
		l.Close()
	}
	if n.hostListener != nil {
		n.hostListener.Close()
	}
	if n.hostEnd != nil {
		n.hostEnd.Close()
	}
	n.SandboxStarted()
	n.proxy.Close()
	done := make(chan struct{})
	go func() {
		n.served.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

// Lines are the run's /mnt/proc/policy lines about its egress.
func (n *Run) Lines() []string {
	e := n.egress
	var l []string
	switch n.mode {
	case Namespace:
		fw := "none"
		if len(e.Forward) > 0 {
			fw = strings.Join(e.Forward, " ")
		}
		l = append(l, "sandbox network egress: a network namespace with only loopback; the run host's proxy at "+e.Proxy+
			" (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY socks5h), its DNS stub at "+e.DNS+" answering granted names only, forwarders at "+fw+
			"; every connection decided on the live policy and recorded (net.connect)")
		for _, s := range n.skipped {
			l = append(l, "sandbox network no forwarder at port "+s+"; reached through the proxy variables only")
		}
	case Landlock:
		l = append(l, "sandbox network egress: the run host's proxy at "+e.Proxy+" on the host's loopback (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY socks5h); Landlock lets the run connect to TCP port "+
			strconv.Itoa(int(e.ConnectPort))+" only, seccomp to TCP sockets only: proxy-aware clients only, no DNS")
	case Shared:
		l = append(l, "sandbox network egress NOT enforced: iso shared; the proxy variables name the run host's proxy at "+e.Proxy+
			", which decides and records what goes through it, but a program that ignores them reaches whatever the host does")
	}
	return l
}

// ProcLines are the run's network lines of /mnt/proc/policy: its grants
// as the policy is now.
func (n *Run) ProcLines() []string {
	return append(n.currentGrants().ProcLines(), n.addedLine()...)
}

// currentGrants is the agent's network grants as its policy is now; nil
// (which grants nothing) when its controls cannot be read.
func (n *Run) currentGrants() *policy.NetworkGrants {
	gen, watched := n.h.Generation()
	n.grantsMu.Lock()
	defer n.grantsMu.Unlock()
	if watched && n.grants != nil && n.grantsGen == gen {
		return n.grants
	}
	a, err := authority.LoadAgent(n.h.Root, n.h.Agent)
	if err != nil {
		n.grants = nil
		return nil
	}
	n.grants, n.grantsGen = a.NetworkGrants(), gen
	return n.grants
}

// SocketsLine is the /mnt/proc/policy line on the socket families the
// seccomp filter lets a run make: with network:default (granted), with
// its egress n, or with neither.
func SocketsLine(granted bool, n *Run) string {
	switch {
	case granted:
		return "sandbox sockets " + sandbox.SocketFamilies(true) + "; other families EPERM"
	case n != nil && n.mode == Namespace:
		return "sandbox sockets " + sandbox.SocketFamilies(true) + " in a network namespace with only loopback; other families EPERM"
	case n != nil:
		return "sandbox sockets AF_UNIX, and AF_INET and AF_INET6 for TCP only; other families EPERM"
	}
	return "sandbox sockets AF_UNIX only, without the network grant; other families EPERM"
}

// BudgetText is net_bytes' or net_connections' mechanism, use and why
// for /mnt/proc/budgets: the proxy counts them, when the run has one.
func BudgetText(key string, granted bool, n *Run) (mech, used, why string) {
	switch {
	case n != nil:
		bytes, conns := n.proxy.Usage()
		if key == "net_bytes" {
			return "proxy", strconv.FormatInt(bytes, 10), ""
		}
		return "proxy", strconv.FormatInt(conns, 10), ""
	case granted:
		return "none", "", "network:default: the run has the host's network, no proxy counts it"
	}
	return "none", "", "no network"
}
