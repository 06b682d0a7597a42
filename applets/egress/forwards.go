package egress

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	"ctx/policy/sandboxplan"
)

// Forwarders of ports granted during a namespace run (DESIGN §17): when a
// policy change grants a name a port with no forwarder yet, the run host
// asks the sandbox's init (Host.Listen: an order on the broker's private
// channel) for a listener at that port in the run's network namespace and
// serves it at once, as it serves those of the start, so a program that
// ignores the proxy variables finds the same whether the grant came
// before the start or after. Each port is asked for once a run; with the
// start's, never more than sandboxplan.MaxEgressForwards. A port the init
// cannot listen on (a program of the run holds it) stays without one, said
// on the run's standard error; nothing else listens instead. A forwarder
// whose grant is revoked stays and refuses: every connection is decided on
// the policy as it is then (netproxy.Proxy.ServeForward).

// forwards are the run's forwarders, by port.
type forwards struct {
	mu    sync.Mutex
	ready bool           // the start's listeners came
	ports map[int]string // port -> the address held or asked for
	// local are the listeners at 127.0.0.1 (a localhost:PORT grant's),
	// by port: a name granted that port later needs the wildcard address,
	// which they are closed for.
	local   map[int]net.Listener
	pending map[uint64]string // order ID -> the address asked for
	nextID  uint64
	told    map[int]bool // ports whose lack of a forwarder was said
	added   []string     // the addresses served since the start's
}

// startForwards notes the start's forwarders (listening or failed: each
// port is asked for once) and asks for those granted since the plan.
func (n *Run) startForwards(l []net.Listener) {
	f := &n.fw
	f.mu.Lock()
	f.ports, f.local, f.pending, f.told = map[int]string{}, map[int]net.Listener{}, map[uint64]string{}, map[int]bool{}
	for _, addr := range n.egress.Forward {
		f.ports[sandboxplan.ForwardPort(addr)] = addr
	}
	for _, ln := range l {
		if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
			f.local[a.Port] = ln
		}
	}
	f.ready = true
	f.mu.Unlock()
	n.growForwards()
}

// growForwards asks the init for a forwarder at each port the grants as
// they are now name and no forwarder holds.
func (n *Run) growForwards() {
	if n.mode != Namespace || n.h.Listen == nil {
		return
	}
	addrs, _ := sandboxplan.ForwardAddrs(n.currentGrants())
	proxyPort := sandboxplan.ForwardPort(n.egress.Proxy)
	type ask struct {
		id   uint64
		addr string
	}
	var asks []ask
	var closing []net.Listener
	f := &n.fw
	f.mu.Lock()
	if !f.ready {
		f.mu.Unlock()
		return
	}
	for _, addr := range addrs {
		port := sandboxplan.ForwardPort(addr)
		held, ok := f.ports[port]
		switch {
		case ok && (held == addr || f.local[port] == nil):
			continue // held, or asked for: once a run
		case ok:
			// A localhost:PORT forwarder, and now a name at PORT: the
			// wildcard address serves both, as it would at the start.
			closing = append(closing, f.local[port])
			delete(f.local, port)
		case port == proxyPort:
			n.tellNoForwarder(port, addr+": the proxy's port")
			continue
		case len(f.ports) >= sandboxplan.MaxEgressForwards:
			n.tellNoForwarder(port, fmt.Sprintf("%s: more than %d forwarded ports", addr, sandboxplan.MaxEgressForwards))
			continue
		}
		f.nextID++
		f.ports[port], f.pending[f.nextID] = addr, addr
		asks = append(asks, ask{f.nextID, addr})
	}
	f.mu.Unlock()
	for _, ln := range closing {
		ln.Close()
	}
	for _, a := range asks {
		if err := n.h.Listen(a.id, a.addr); err != nil {
			n.Listened(a.id, "asking the sandbox's init: "+err.Error(), nil)
		}
	}
}

// tellNoForwarder says once a run, on its standard error, why a granted
// port got no forwarder. Under n.fw.mu.
func (n *Run) tellNoForwarder(port int, why string) {
	if n.fw.told[port] {
		return
	}
	n.fw.told[port] = true
	n.h.Warnf("%s: network: no forwarder at %s (reached through the proxy variables only)", n.h.Agent, why)
}

// Listened is the init's answer to the forwarder order id: its listener,
// or why it has none (errText). The run host hands over every answer of
// the op; one that answers no order of this run is closed.
func (n *Run) Listened(id uint64, errText string, files []*os.File) {
	defer func() {
		for _, file := range files {
			file.Close()
		}
	}()
	if n == nil {
		return
	}
	n.mu.Lock()
	closed := n.closed // the run's end: nothing to serve or say
	n.mu.Unlock()
	f := &n.fw
	f.mu.Lock()
	addr, ok := f.pending[id]
	delete(f.pending, id)
	port := sandboxplan.ForwardPort(addr)
	ok = ok && !closed
	if ok && (errText != "" || len(files) != 1) {
		if errText == "" {
			errText = "no listener came"
		}
		n.tellNoForwarder(port, addr+": "+errText)
	}
	f.mu.Unlock()
	if !ok || errText != "" || len(files) != 1 {
		return
	}
	ln, err := net.FileListener(files[0])
	if err == nil && ln.Addr().String() != addr {
		ln.Close()
		err = fmt.Errorf("the init listened at %s", ln.Addr())
	}
	if err != nil {
		f.mu.Lock()
		n.tellNoForwarder(port, addr+": "+err.Error())
		f.mu.Unlock()
		return
	}
	n.mu.Lock()
	if n.closed || n.listeners == nil {
		n.mu.Unlock()
		ln.Close()
		return
	}
	n.listeners.Forward = append(n.listeners.Forward, ln) // closed with the run's egress
	n.mu.Unlock()
	f.mu.Lock()
	if ln.Addr().(*net.TCPAddr).IP.IsLoopback() {
		f.local[port] = ln
	}
	f.added = append(f.added, addr)
	f.mu.Unlock()
	n.serve(func(c net.Conn) { n.proxy.ServeForward(c, n.book) }, ln)
	if n.h.Changed != nil {
		n.h.Changed() // /mnt/proc/policy lists it (ProcLines)
	}
}

// addedLine is the /mnt/proc/policy line of the forwarders served since
// the start's, none when there are none.
func (n *Run) addedLine() []string {
	n.fw.mu.Lock()
	defer n.fw.mu.Unlock()
	if len(n.fw.added) == 0 {
		return nil
	}
	return []string{"sandbox network forwarders added during the run at " + strings.Join(n.fw.added, " ") + " (ports granted since the start)"}
}
