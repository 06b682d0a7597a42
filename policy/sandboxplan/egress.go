package sandboxplan

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"ctx/policy"
)

// Egress is how a run without network:default reaches what its named
// network grants allow (DESIGN §17): through the run host's egress proxy.
// In a network namespace (userns, uid) the sandbox's init listens on the
// namespace's loopback and hands the listeners to the run host; in iso
// landlock the run host listens on the host's loopback and Landlock lets
// the run connect to that one TCP port; iso shared has no plan, only the
// proxy variables.
type Egress struct {
	// Proxy is the proxy's address as the program reaches it
	// (HTTP_PROXY and the rest name it).
	Proxy string `json:"proxy"`
	// DNS is the DNS stub's address (UDP and TCP) inside the network
	// namespace: the synthesized resolv.conf names it.
	DNS string `json:"dns,omitempty"`
	// Forward are the addresses the init listens on for programs that
	// ignore the proxy variables: the wildcard address at each port a
	// name is granted on (the stub answers names with loopback addresses
	// of EgressBook), 127.0.0.1 at each localhost:PORT grant's port.
	Forward []string `json:"forward,omitempty"`
	// ConnectPort, in iso landlock, is the one TCP port Landlock lets the
	// run connect to: the proxy's, on the host's loopback.
	ConnectPort uint16 `json:"connect_port,omitempty"`
}

// Addresses and limits of a namespace run's egress.
const (
	// EgressDNSAddr is the DNS stub's address in the namespace, the one
	// resolv.conf names.
	EgressDNSAddr = "127.0.0.53"
	// EgressBook is the prefix the DNS stub gives granted names their
	// sandbox-local addresses from.
	EgressBook = "127.100.0.0/16"
	// EgressProxyPort is the proxy's port on the namespace's 127.0.0.1
	// unless a forwarder needs it (then the next free one above).
	EgressProxyPort = 3128
	// MaxEgressForwards bounds the forwarders one run listens on; ports
	// past it are reached through the proxy variables only.
	MaxEgressForwards = 64
)

// NamespaceEgress is the egress of a namespace run with grants g (nil
// grants nothing: the run still gets the proxy and the stub, so a
// refusal says what would allow it instead of a timeout). It also
// returns the ports it left without a forwarder, each with why.
func NamespaceEgress(g *policy.NetworkGrants) (*Egress, []string) {
	e := &Egress{DNS: netip.AddrPortFrom(netip.MustParseAddr(EgressDNSAddr), 53).String()}
	forward, skipped := ForwardAddrs(g)
	ports := map[int]bool{}
	for _, addr := range forward {
		port := ForwardPort(addr)
		ports[port] = true
		if len(e.Forward) >= MaxEgressForwards {
			skipped = append(skipped, fmt.Sprintf("%d: more than %d forwarded ports", port, MaxEgressForwards))
			continue
		}
		e.Forward = append(e.Forward, addr)
	}
	port := EgressProxyPort
	for ports[port] {
		port++
	}
	e.Proxy = "127.0.0.1:" + strconv.Itoa(port)
	return e, skipped
}

// ForwardAddrs are the addresses forwarders listen on for grants g, with
// no bound: the wildcard address at each port a name (or a wildcard name)
// is granted on, first, then 127.0.0.1 at each port only a localhost:PORT
// grant names, each list by port. It also returns the ports it leaves
// out, each with why (53, the DNS stub's). The start's forwarders are the
// first MaxEgressForwards (NamespaceEgress); those of ports granted during
// the run come after them, within the same bound (applets/egress).
func ForwardAddrs(g *policy.NetworkGrants) (addrs, skipped []string) {
	names := map[int]bool{}
	for _, t := range g.Targets() {
		if t.Kind == policy.NetworkHost || t.Kind == policy.NetworkWildcard {
			for _, p := range t.Ports() {
				names[p] = true
			}
		}
	}
	local := map[int]bool{}
	for _, p := range g.LocalhostPorts() {
		if !names[p] {
			local[p] = true
		}
	}
	add := func(set map[int]bool, host string) {
		var ports []int
		for p := range set {
			ports = append(ports, p)
		}
		sort.Ints(ports)
		for _, p := range ports {
			if p == 53 {
				skipped = append(skipped, "53: the DNS stub's port")
				continue
			}
			addrs = append(addrs, host+":"+strconv.Itoa(p))
		}
	}
	add(names, "0.0.0.0")
	add(local, "127.0.0.1")
	return addrs, skipped
}

// ForwardPort is the port of a forwarder's address (ForwardAddrs), 0 when
// it has none.
func ForwardPort(addr string) int {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return 0
	}
	return int(ap.Port())
}

// ValidForward reports why addr cannot be a forwarder's address, nil when
// it can: an IPv4 address, loopback or the wildcard one, and a port from 1
// to 65535 that is not the DNS stub's.
func ValidForward(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() || ap.Port() == 0 || ap.Port() == 53 ||
		!(ap.Addr().IsLoopback() || ap.Addr().IsUnspecified()) {
		return fmt.Errorf("%q is not an IPv4 loopback or wildcard address and a port other than 53", addr)
	}
	return nil
}

// ProxyEnv returns env with the proxy variables naming proxy (host:port)
// set, upper and lower case, replacing any the agent's env control set:
// in a run with egress the proxy is the only way out. ALL_PROXY is
// socks5h://, so names, not addresses, reach the proxy; NO_PROXY keeps
// the run's own loopback direct.
func ProxyEnv(env []string, proxy string) []string {
	vals := map[string]string{
		"HTTP_PROXY":  "http://" + proxy,
		"HTTPS_PROXY": "http://" + proxy,
		"ALL_PROXY":   "socks5h://" + proxy,
		"NO_PROXY":    "localhost,127.0.0.1,::1",
	}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := vals[strings.ToUpper(k)]; !ours {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"} {
		out = append(out, k+"="+vals[k], strings.ToLower(k)+"="+vals[k])
	}
	return out
}

// EgressResolvConf is the synthesized /etc/resolv.conf of a run with a
// DNS stub: the stub alone, no search domains.
func EgressResolvConf() string {
	return "# ctx: the run's DNS stub answers granted names only (ctx man ctx.sandbox, NETWORK)\nnameserver " + EgressDNSAddr + "\n"
}

// validate checks the egress addresses the init will listen on: each an
// IPv4 address and port, the proxy and DNS on loopback, forwarders on
// loopback or the wildcard address.
func (e *Egress) validate() error {
	check := func(what, s string, wildcard bool) error {
		ap, err := netip.ParseAddrPort(s)
		if err != nil || !ap.Addr().Is4() || ap.Port() == 0 ||
			!(ap.Addr().IsLoopback() || wildcard && ap.Addr().IsUnspecified()) {
			return fmt.Errorf("plan: egress %s %q is not a loopback IPv4 address and port", what, s)
		}
		return nil
	}
	if e.ConnectPort != 0 {
		return nil // iso landlock: the run host listens, nothing here does
	}
	if err := check("proxy", e.Proxy, false); err != nil {
		return err
	}
	if err := check("dns", e.DNS, false); err != nil {
		return err
	}
	if len(e.Forward) > MaxEgressForwards {
		return fmt.Errorf("plan: %d egress forwarders (limit %d)", len(e.Forward), MaxEgressForwards)
	}
	for _, f := range e.Forward {
		if err := check("forwarder", f, true); err != nil {
			return err
		}
	}
	return nil
}
