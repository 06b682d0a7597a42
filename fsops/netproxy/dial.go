package netproxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// refusal is why a connection was not made, for the client and the record.
type refusal struct {
	layer  string
	reason string
	rule   string // the rule that would allow it
	fix    string
}

func (r *refusal) Error() string { return r.reason }

// line is the one line a refused client reads: the reason, and what
// would allow it.
func (r *refusal) line() string {
	s := "ctx: refused by " + r.layer + ": " + r.reason
	switch {
	case r.fix != "":
		s += "; to allow it: " + r.fix
	case r.rule != "":
		s += "; the rule that would allow it: " + r.rule
	}
	return oneLine(s)
}

// oneLine makes s safe as one line of a reply: control bytes become '?'.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// cleanHost checks a requested host before anything decides on it: ASCII
// lower case, one final dot dropped, and only the bytes of a DNS name or
// an IP address (IPv6 without brackets, no zone). Userinfo, percent
// escapes, NUL, CR, LF, blanks and non-ASCII bytes are refused here, so
// the name decided is the name resolved.
func cleanHost(host string) (string, *refusal) {
	bad := func(why string) (string, *refusal) {
		return "", &refusal{layer: LayerRequest, reason: fmt.Sprintf("host %s: %s", strconv.QuoteToASCII(truncate(host)), why)}
	}
	if host == "" || len(host) > 254 {
		return bad("empty or longer than 253 bytes")
	}
	if strings.IndexByte(host, ':') >= 0 {
		addr, err := netip.ParseAddr(host)
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return bad("not an IPv6 address")
		}
		return addr.Unmap().String(), nil
	}
	b := []byte(host)
	for i, c := range b {
		switch {
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.':
		default:
			return bad(fmt.Sprintf("byte %q is not one of a-z 0-9 - .", c))
		}
	}
	h := strings.TrimSuffix(string(b), ".")
	if h == "" || strings.HasPrefix(h, ".") || strings.Contains(h, "..") {
		return bad("empty label")
	}
	return h, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// addressClass names the range of an address the proxy refuses unless
// granted, or "" for an address it dials for any allowed name. never is
// true for addresses no grant reaches (unspecified, multicast, broadcast,
// reserved): a connection to 0.0.0.0 reaches the host itself.
func addressClass(a netip.Addr) (class string, never bool) {
	a = a.Unmap()
	if a.Is6() {
		if v4, ok := embeddedIPv4(a); ok {
			if c, n := addressClass(v4); c != "" {
				return c + " (embedded in " + a.String() + ")", n
			}
		}
	}
	switch {
	case a.IsUnspecified():
		return "unspecified", true
	case a.IsMulticast():
		return "multicast", true
	case a.Is4() && (a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || reserved4.Contains(a) || thisNet4.Contains(a)):
		return "reserved", true
	case a.IsLoopback():
		return "loopback", false
	case a.IsPrivate():
		return "private", false
	case a.IsLinkLocalUnicast():
		return "link-local", false
	case a.Is4() && cgnat.Contains(a):
		return "shared (CGNAT)", false
	}
	return "", false
}

var (
	cgnat     = netip.MustParsePrefix("100.64.0.0/10")
	reserved4 = netip.MustParsePrefix("240.0.0.0/4")
	thisNet4  = netip.MustParsePrefix("0.0.0.0/8")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	compat4   = netip.MustParsePrefix("::/96")
)

// embeddedIPv4 returns the IPv4 address an IPv6 address carries to a
// translator (NAT64, 6to4, IPv4-compatible), which is where a connection
// to it ends up.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case nat64.Contains(a), compat4.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// stillAllowed decides host:port and, for a refused address, the address
// itself: what Revalidate asks of an open relay.
func (p *Proxy) stillAllowed(host string, port int, addr netip.Addr) (bool, Decision) {
	d := p.decide(host, port)
	if !d.Allowed {
		return false, d
	}
	if class, never := addressClass(addr); class != "" && !d.Local {
		if never {
			return false, d
		}
		if da := p.decide(addr.String(), port); !da.Allowed {
			return false, da
		}
	}
	return true, d
}

func (p *Proxy) decide(host string, port int) Decision {
	d := p.cfg.Decide(host, port)
	if !d.Allowed && d.Layer == "" {
		d.Layer = "agent-policy"
	}
	return d
}

// dialTarget decides, resolves and dials host:port, the host cleaned.
// The address dialled is the address checked.
func (p *Proxy) dialTarget(host string, port int, rec *Record) (net.Conn, *refusal) {
	d := p.decide(host, port)
	rec.Rule = d.Rule
	if !d.Allowed {
		return nil, &refusal{layer: d.Layer, reason: d.Reason, rule: d.Rule, fix: d.Fix}
	}
	if r := p.takeConnection(); r != nil {
		return nil, r
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
	defer cancel()
	addrs, r := p.resolve(ctx, host)
	if r != nil {
		return nil, r
	}
	candidates, r := p.admit(host, port, addrs, d)
	if r != nil {
		return nil, r
	}
	var lastErr error
	for _, a := range candidates {
		ap := netip.AddrPortFrom(a, uint16(port))
		c, err := p.cfg.Dial(ctx, ap)
		if err == nil {
			rec.Addr = ap
			return c, nil
		}
		lastErr = err
	}
	return nil, &refusal{layer: LayerDial, reason: fmt.Sprintf("%s: %v", joinHostPort(host, port), lastErr)}
}

// takeConnection counts a connection against net_connections.
func (p *Proxy) takeConnection() *refusal {
	if p.cfg.Budget.Bytes > 0 && (p.bytesLeft.Load() <= 0 || p.bytesSpent.Load()) {
		return &refusal{layer: LayerBudget, reason: fmt.Sprintf("net_bytes budget of %d bytes spent", p.cfg.Budget.Bytes)}
	}
	n := p.conns.Add(1)
	if max := p.cfg.Budget.Connections; max > 0 && n > max {
		p.conns.Add(-1)
		return &refusal{layer: LayerBudget, reason: fmt.Sprintf("net_connections budget of %d connections spent", max)}
	}
	return nil
}

// resolve returns host's addresses: an address as itself, localhost as
// the loopback (never asked of a resolver), a name through the resolver,
// as an absolute name so no search domain is tried.
func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, *refusal) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	if host == "localhost" {
		return []netip.Addr{localhost4, netip.IPv6Loopback()}, nil
	}
	addrs, err := p.cfg.Resolver.LookupNetIP(ctx, "ip", host+".")
	if err != nil || len(addrs) == 0 {
		why := "no address"
		if err != nil {
			why = err.Error()
		}
		return nil, &refusal{layer: LayerResolve, reason: host + " does not resolve: " + why}
	}
	return addrs, nil
}

// admit keeps the addresses the decision lets the proxy dial: for a
// grant that names its target (d.Local) every address but those no grant
// reaches; for a name's grant, those outside the refused ranges, and those
// inside whose address is itself granted (localhost:PORT for loopback).
func (p *Proxy) admit(host string, port int, addrs []netip.Addr, d Decision) ([]netip.Addr, *refusal) {
	var ok []netip.Addr
	var first *refusal
	for _, a := range addrs {
		a = a.Unmap()
		class, never := addressClass(a)
		if class == "" || d.Local && !never {
			ok = append(ok, a)
			continue
		}
		r := &refusal{layer: LayerAddress, reason: fmt.Sprintf("%s resolved to %s, a %s address, which no grant reaches", host, a, class)}
		if !never {
			da := p.decide(a.String(), port)
			if da.Allowed {
				ok = append(ok, a)
				continue
			}
			r.rule, r.fix = da.Rule, da.Fix
			r.reason = fmt.Sprintf("%s resolved to %s, a %s address: a name's grant reaches loopback, private, link-local and shared addresses only when the address is granted too", host, a, class)
		}
		if first == nil {
			first = r
		}
	}
	if len(ok) == 0 {
		return nil, first
	}
	return ok, nil
}

func joinHostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
