package policy

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// NetworkGrants are the network rules of one subject in a policy,
// compiled for the egress proxy's decisions. Build them again when the
// policy changes: a decision on the old value is a decision on the old
// policy. The zero value and nil grant nothing.
type NetworkGrants struct {
	subject string
	file    string // the policy control, for the fix line; "" when unknown
	all     bool
	exact   map[string][]NetworkTarget // host -> its grants
	wild    map[string][]NetworkTarget // suffix -> its grants
	local   map[int]bool               // localhost ports
	addrs   map[netip.Addr][]NetworkTarget
	targets []NetworkTarget // every grant once, in file order
}

// NetworkGrantsOf compiles subject's network rules in p.
func NetworkGrantsOf(p *Policy, subject string) *NetworkGrants {
	g := &NetworkGrants{subject: subject, exact: map[string][]NetworkTarget{},
		wild: map[string][]NetworkTarget{}, local: map[int]bool{}, addrs: map[netip.Addr][]NetworkTarget{}}
	seen := map[NetworkTarget]bool{}
	for _, r := range p.Rules() {
		if r.Subject != subject || r.Object.Class != ClassNetwork || r.Permission != PermConnect {
			continue
		}
		t, reason := parseNetworkTarget(r.Object.Name)
		if reason != "" || seen[t] {
			continue
		}
		seen[t] = true
		g.targets = append(g.targets, t)
		switch t.Kind {
		case NetworkAll:
			g.all = true
		case NetworkHost:
			g.exact[t.Host] = append(g.exact[t.Host], t)
		case NetworkWildcard:
			g.wild[t.Host] = append(g.wild[t.Host], t)
		case NetworkLocalhost:
			g.local[t.Port] = true
		case NetworkAddress:
			g.addrs[t.Addr] = append(g.addrs[t.Addr], t)
		}
	}
	return g
}

// NetworkGrants compiles the agent's network rules; refusals name the fix
// as a `ctx policy allow` line for its policy control.
func (a *Agent) NetworkGrants() *NetworkGrants {
	g := NetworkGrantsOf(a.Policy, a.Subject)
	g.file = "agent/" + a.Name + ".d/policy"
	return g
}

// NetworkDecision is the answer for one connection request.
type NetworkDecision struct {
	Allowed bool
	// Rule is the rule that allows the request, or when refused the
	// narrowest rule that would allow it (empty for a malformed request).
	Rule string
	// Fix is the command that adds Rule to the agent's policy, when
	// refused and the policy control is known.
	Fix string
	// Layer is the refusing layer: LayerRequest for a malformed request,
	// LayerAgentPolicy when no rule allows it. Empty when allowed.
	Layer  Layer
	Reason string
	// Local is true when the allowing grant names its target itself
	// (default, localhost:PORT, an address), so the proxy lets it reach a
	// loopback or private address; a name's grant never does.
	Local bool
}

// All reports whether network:default connect is granted.
func (g *NetworkGrants) All() bool { return g != nil && g.all }

// Decide decides a request to connect to host:port. host is as a client
// sent it (NormalizeNetworkHost canonicalises it). localhost, 127.0.0.1
// and ::1 are the host's loopback, decided by localhost:PORT grants.
func (g *NetworkGrants) Decide(host string, port int) NetworkDecision {
	if port < 1 || port > 65535 {
		return NetworkDecision{Layer: LayerRequest, Reason: fmt.Sprintf("port %d is not 1-65535", port)}
	}
	h, err := NormalizeNetworkHost(host)
	if err != nil {
		return NetworkDecision{Layer: LayerRequest, Reason: "host " + nameReason(err)}
	}
	what := joinHostPort(h, port)
	if g.All() {
		return g.allow(NetworkTarget{Kind: NetworkAll, Host: NetworkDefault}, what, true)
	}
	if h == "localhost" || h == "127.0.0.1" || h == "::1" {
		t := NetworkTarget{Kind: NetworkLocalhost, Host: "localhost", Port: port}
		if g != nil && g.local[port] {
			return g.allow(t, what, true)
		}
		return g.refuse(t, what)
	}
	if addr, err := netip.ParseAddr(h); err == nil {
		if t, ok := g.matchAddr(addr, port); ok {
			return g.allow(t, what, true)
		}
		return g.refuse(NetworkTarget{Kind: NetworkAddress, Host: h, Addr: addr, Port: narrowPort(port)}, what)
	}
	if t, ok := g.matchName(h, port); ok {
		return g.allow(t, what, false)
	}
	return g.refuse(NetworkTarget{Kind: NetworkHost, Host: h, Port: narrowPort(port)}, what)
}

// narrowPort is the port a suggested rule names: none for 80 and 443,
// which a rule without a port covers.
func narrowPort(port int) int {
	if port == 80 || port == 443 {
		return 0
	}
	return port
}

func (g *NetworkGrants) matchAddr(addr netip.Addr, port int) (NetworkTarget, bool) {
	if g == nil {
		return NetworkTarget{}, false
	}
	for _, t := range g.addrs[addr] {
		if t.CoversPort(port) {
			return t, true
		}
	}
	return NetworkTarget{}, false
}

// matchName finds the grant for a name: the exact name first, then the
// wildcards from the longest suffix to the shortest.
func (g *NetworkGrants) matchName(h string, port int) (NetworkTarget, bool) {
	if g == nil {
		return NetworkTarget{}, false
	}
	for _, t := range g.exact[h] {
		if t.CoversPort(port) {
			return t, true
		}
	}
	for rest := h; ; {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			return NetworkTarget{}, false
		}
		rest = rest[i+1:]
		for _, t := range g.wild[rest] {
			if t.CoversPort(port) {
				return t, true
			}
		}
	}
}

func (g *NetworkGrants) rule(t NetworkTarget) string {
	subject := "SUBJECT"
	if g != nil && g.subject != "" {
		subject = g.subject
	}
	return Rule{subject, Object{ClassNetwork, t.String()}, PermConnect}.String()
}

func (g *NetworkGrants) allow(t NetworkTarget, what string, local bool) NetworkDecision {
	r := g.rule(t)
	return NetworkDecision{Allowed: true, Rule: r, Local: local, Reason: fmt.Sprintf("%s allowed by %q", what, r)}
}

func (g *NetworkGrants) refuse(t NetworkTarget, what string) NetworkDecision {
	d := NetworkDecision{Layer: LayerAgentPolicy, Rule: g.rule(t)}
	d.Reason = "no rule allows " + what
	if g != nil && g.file != "" && g.subject != "" {
		d.Fix = "ctx policy allow --in " + g.file + " " + g.subject + " network:" + t.String() + " connect"
	}
	return d
}

func joinHostPort(host string, port int) string {
	if strings.IndexByte(host, ':') >= 0 {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

// NameGranted reports whether some grant covers the DNS name host on any
// port, and names one such rule: the question a DNS stub asks before it
// answers for a name. localhost and addresses are never DNS answers here.
func (g *NetworkGrants) NameGranted(host string) (rule string, ok bool) {
	h, err := NormalizeNetworkHost(host)
	if err != nil || h == "localhost" || g == nil {
		return "", false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", false
	}
	if g.all {
		return g.rule(NetworkTarget{Kind: NetworkAll, Host: NetworkDefault}), true
	}
	for _, port := range g.Ports(h) {
		if t, ok := g.matchName(h, port); ok {
			return g.rule(t), true
		}
	}
	return "", false
}

// Ports returns, sorted, the ports the grants cover for the DNS name host
// (exact and wildcard grants): where a forwarder for the name listens.
// Under network:default it is nil: that run has no proxy.
func (g *NetworkGrants) Ports(host string) []int {
	h, err := NormalizeNetworkHost(host)
	if err != nil || g == nil || g.all {
		return nil
	}
	set := map[int]bool{}
	for _, t := range g.exact[h] {
		for _, p := range t.Ports() {
			set[p] = true
		}
	}
	for rest, i := h, strings.IndexByte(h, '.'); i >= 0; i = strings.IndexByte(rest, '.') {
		rest = rest[i+1:]
		for _, t := range g.wild[rest] {
			for _, p := range t.Ports() {
				set[p] = true
			}
		}
	}
	return sortedPorts(set)
}

// LocalhostPorts returns, sorted, the ports of the localhost:PORT grants.
func (g *NetworkGrants) LocalhostPorts() []int {
	if g == nil {
		return nil
	}
	return sortedPorts(g.local)
}

func sortedPorts(set map[int]bool) []int {
	var out []int
	for p := range set {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

// Targets returns every granted network object once, in policy order.
func (g *NetworkGrants) Targets() []NetworkTarget {
	if g == nil {
		return nil
	}
	return append([]NetworkTarget(nil), g.targets...)
}

// ProcLines are the run's network lines for its policy account
// (ProcPolicyPath): "network:default connect granted" or "... rejected
// agent-policy", then one "network:NAME connect granted" per named grant,
// so the agent can read what it may reach.
func (g *NetworkGrants) ProcLines() []string {
	if g.All() {
		return []string{"network:default connect granted"}
	}
	lines := []string{"network:default connect rejected " + string(LayerAgentPolicy)}
	for _, t := range g.Targets() {
		lines = append(lines, "network:"+t.String()+" connect granted")
	}
	return lines
}

// Covers reports whether the grants cover every connection target t
// stands for, and names the rules that do: what a child's rule must be
// within its parent's grants, and what `ctx policy explain` asks of a
// network object.
func (g *NetworkGrants) Covers(t NetworkTarget) ([]string, bool) {
	if g.All() {
		return []string{g.rule(NetworkTarget{Kind: NetworkAll, Host: NetworkDefault})}, true
	}
	if t.Kind == NetworkAll || g == nil {
		return nil, false
	}
	var rules []string
	for _, port := range t.Ports() {
		by, ok := g.coverOne(t, port)
		if !ok {
			return nil, false
		}
		if r := g.rule(by); len(rules) == 0 || rules[len(rules)-1] != r {
			rules = append(rules, r)
		}
	}
	return rules, true
}

func (g *NetworkGrants) coverOne(t NetworkTarget, port int) (NetworkTarget, bool) {
	switch t.Kind {
	case NetworkHost:
		return g.matchName(t.Host, port)
	case NetworkLocalhost:
		return t, g.local[port]
	case NetworkAddress:
		return g.matchAddr(t.Addr, port)
	case NetworkWildcard:
		// Only a wildcard at the same or a shorter suffix covers one.
		for rest := t.Host; ; {
			for _, w := range g.wild[rest] {
				if w.CoversPort(port) {
					return w, true
				}
			}
			i := strings.IndexByte(rest, '.')
			if i < 0 {
				return NetworkTarget{}, false
			}
			rest = rest[i+1:]
		}
	}
	return NetworkTarget{}, false
}
