package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Network objects name what a run may connect to through its run host's
// egress proxy (DESIGN §17). The NAME of network:NAME is one of:
//
//	default             everything the host reaches (the run shares no
//	                    proxy: its sandbox keeps the host's network)
//	HOST[:PORT]         an exact DNS name
//	*.SUFFIX[:PORT]     every name below SUFFIX, not SUFFIX itself
//	localhost:PORT      a service on the host's loopback (port required)
//	IPV4[:PORT]         one address, by explicit grant only
//	[IPV6][:PORT]
//
// Without :PORT a grant covers ports 80 and 443. The grammar is strict, so
// that a rule means one thing: names are lower case ASCII (an
// internationalised name in its xn-- form), labels of 1-63 letters,
// digits and inner hyphens, at least two labels (a single label would be
// completed by the resolver's search domains), the last label not a
// number (1.2.3.4 or 0x7f are addresses to a resolver, never names).
// One final dot is dropped: "example.com." is "example.com". An address
// is written canonically (no leading zeros; IPv6 compressed, in
// brackets); loopback is refused (localhost:PORT says it), and so are
// unspecified, multicast and broadcast addresses, which no connection
// reaches. A wildcard's SUFFIX has two labels at least: *.com is refused.

// NetworkKind is the shape of a network object name.
type NetworkKind uint8

const (
	NetworkAll       NetworkKind = iota + 1 // default
	NetworkHost                             // an exact DNS name
	NetworkWildcard                         // *.SUFFIX
	NetworkLocalhost                        // localhost:PORT
	NetworkAddress                          // an IP literal
)

// maxHostLen is the longest DNS name in its dotted text form (RFC 1035's
// 255-byte wire form less the length bytes).
const maxHostLen = 253

// NetworkTarget is a parsed network object name.
type NetworkTarget struct {
	Kind NetworkKind
	// Host is the DNS name, the wildcard's SUFFIX (without "*."), or the
	// address in canonical text form (without brackets); "localhost" for
	// NetworkLocalhost, "default" for NetworkAll.
	Host string
	Addr netip.Addr // NetworkAddress only
	// Port is the port, or 0 for the default ports 80 and 443.
	Port int
}

// DefaultPorts are the ports a network grant without :PORT covers.
var DefaultPorts = []int{80, 443}

// Ports returns the ports t covers.
func (t NetworkTarget) Ports() []int {
	if t.Port != 0 {
		return []int{t.Port}
	}
	return DefaultPorts
}

// CoversPort reports whether t covers port.
func (t NetworkTarget) CoversPort(port int) bool {
	if t.Port != 0 {
		return t.Port == port
	}
	return port == 80 || port == 443
}

// String renders t canonically, as a rule names it.
func (t NetworkTarget) String() string {
	var host string
	switch t.Kind {
	case NetworkAll:
		return NetworkDefault
	case NetworkWildcard:
		host = "*." + t.Host
	case NetworkAddress:
		host = t.Host
		if t.Addr.Is6() {
			host = "[" + host + "]"
		}
	default:
		host = t.Host
	}
	if t.Port != 0 {
		host += ":" + strconv.Itoa(t.Port)
	}
	return host
}

// ParseNetworkTarget parses the NAME of network:NAME as a policy rule
// writes it. The error is a *NameError saying why.
func ParseNetworkTarget(name string) (NetworkTarget, error) {
	t, reason := parseNetworkTarget(name)
	if reason != "" {
		return NetworkTarget{}, &NameError{name, reason}
	}
	return t, nil
}

func parseNetworkTarget(name string) (NetworkTarget, string) {
	if name == NetworkDefault {
		return NetworkTarget{Kind: NetworkAll, Host: NetworkDefault}, ""
	}
	host, port, reason := splitNetworkPort(name)
	if reason != "" {
		return NetworkTarget{}, reason
	}
	host = strings.TrimSuffix(host, ".")
	switch {
	case host == "localhost":
		if port == 0 {
			return NetworkTarget{}, "localhost needs a port: localhost:PORT"
		}
		return NetworkTarget{Kind: NetworkLocalhost, Host: host, Port: port}, ""
	case strings.HasPrefix(name, "["):
		return parseAddressTarget(host, port, true)
	case looksNumeric(host):
		return parseAddressTarget(host, port, false)
	case strings.HasPrefix(host, "*."):
		suffix := host[2:]
		if reason := checkDNSName(suffix); reason != "" {
			return NetworkTarget{}, "wildcard suffix: " + reason
		}
		return NetworkTarget{Kind: NetworkWildcard, Host: suffix, Port: port}, ""
	}
	if reason := checkDNSName(host); reason != "" {
		return NetworkTarget{}, reason
	}
	return NetworkTarget{Kind: NetworkHost, Host: host, Port: port}, ""
}

// splitNetworkPort splits NAME into the host and its port (0 when absent).
// An IPv6 address comes in brackets, which are removed.
func splitNetworkPort(name string) (host string, port int, reason string) {
	rest := ""
	if strings.HasPrefix(name, "[") {
		end := strings.IndexByte(name, ']')
		if end < 0 {
			return "", 0, "an IPv6 address in brackets lacks its ]"
		}
		host, rest = name[1:end], name[end+1:]
		if rest != "" && rest[0] != ':' {
			return "", 0, "after ] comes :PORT or nothing"
		}
	} else {
		var after string
		var found bool
		host, after, found = strings.Cut(name, ":")
		if strings.Contains(after, ":") {
			return "", 0, "more than one : (write an IPv6 address in brackets: [2001:db8::1]:443)"
		}
		if found {
			rest = ":" + after
		}
	}
	if rest == "" {
		return host, 0, ""
	}
	port, reason = parsePort(rest[1:])
	return host, port, reason
}

// parsePort parses a decimal port 1-65535 written canonically.
func parsePort(s string) (int, string) {
	if s == "" {
		return 0, "empty port after :"
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Sprintf("port %s is not a decimal number", quote(s))
		}
	}
	if s[0] == '0' {
		return 0, fmt.Sprintf("port %s: no port 0 or leading zero", quote(s))
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 65535 {
		return 0, fmt.Sprintf("port %s is over 65535", quote(s))
	}
	return n, ""
}

// parseAddressTarget checks an IP literal grant: canonical, and an
// address a connection can reach other than the loopback.
func parseAddressTarget(host string, port int, bracketed bool) (NetworkTarget, string) {
	addr, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return NetworkTarget{}, fmt.Sprintf("%s is not an IP address (a name's last label is never a number)", quote(host))
	case addr.Is6() != bracketed:
		return NetworkTarget{}, "an IPv6 address is written in brackets, an IPv4 address without"
	case addr.Zone() != "":
		return NetworkTarget{}, "an address with a zone (%) is refused"
	case addr.Is4In6():
		return NetworkTarget{}, "write an IPv4-mapped address as the IPv4 address"
	case addr.String() != host:
		return NetworkTarget{}, fmt.Sprintf("write the address canonically: %s", addr)
	case addr.IsLoopback():
		return NetworkTarget{}, "the loopback is granted as localhost:PORT"
	case addr.IsUnspecified() || addr.IsMulticast() || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return NetworkTarget{}, fmt.Sprintf("%s is not an address a connection reaches", addr)
	}
	return NetworkTarget{Kind: NetworkAddress, Host: host, Addr: addr, Port: port}, ""
}

// looksNumeric reports whether host is an IP literal rather than a name:
// an IPv4 form (digits and dots) or a name whose last label is a number.
func looksNumeric(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	return last != "" && isNumberLabel(last)
}

// isNumberLabel reports whether a label reads as a number to inet_aton
// (and to the URL standard's host parser): all decimal digits, or 0x
// followed by hex digits.
func isNumberLabel(l string) bool {
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// checkDNSName checks a full DNS name as rules write it, and says why not.
func checkDNSName(s string) string {
	switch {
	case s == "":
		return "empty host name"
	case len(s) > maxHostLen:
		return fmt.Sprintf("host name longer than %d bytes", maxHostLen)
	case !strings.Contains(s, "."):
		return fmt.Sprintf("%s is a single label, which a resolver completes with its search domains: write the full name", quote(s))
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if reason := checkLabel(l); reason != "" {
			return reason
		}
	}
	if isNumberLabel(labels[len(labels)-1]) {
		return fmt.Sprintf("%s ends in a number, which resolvers read as an address", quote(s))
	}
	return ""
}

// checkLabel checks one label: letters, digits, inner hyphens, 1-63 bytes,
// and no "--" in places 3-4 except the punycode prefix xn--.
func checkLabel(l string) string {
	switch {
	case l == "":
		return "empty label (two dots in a row, or a dot at the start)"
	case len(l) > 63:
		return fmt.Sprintf("label %s is longer than 63 bytes", quote(l))
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Sprintf("label %s starts or ends with a hyphen", quote(l))
	case len(l) >= 4 && l[2:4] == "--" && !strings.HasPrefix(l, "xn--"):
		return fmt.Sprintf("label %s has -- in places 3-4, which only the punycode prefix xn-- may", quote(l))
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-':
		case 'A' <= c && c <= 'Z':
			return fmt.Sprintf("label %s has upper case: write host names in lower case", quote(l))
		case c >= 0x80:
			return fmt.Sprintf("label %s is not ASCII: write an internationalised name in its xn-- (punycode) form", quote(l))
		default:
			return fmt.Sprintf("label %s has %q, not one of a-z 0-9 -", quote(l), c)
		}
	}
	return ""
}

// canonicalNetworkName returns the canonical spelling of a valid network
// object name: the name as written but for a final dot on the host.
func canonicalNetworkName(name string) string {
	t, reason := parseNetworkTarget(name)
	if reason != "" {
		return name
	}
	return t.String()
}

// NormalizeNetworkHost checks and canonicalises the host of a connection
// request (a proxy's CONNECT line, a SOCKS request, a DNS question): case
// folded to lower, one final dot dropped, an IP address (IPv6 without
// brackets) in canonical form. Anything else a rule could not name (a
// single label other than localhost, bytes outside a-z 0-9 - ., an empty
// label, userinfo, a port, a zone) is an error saying why.
func NormalizeNetworkHost(host string) (string, error) {
	if len(host) > maxHostLen+1 {
		return "", &NameError{host, fmt.Sprintf("host name longer than %d bytes", maxHostLen)}
	}
	if strings.IndexByte(host, ':') >= 0 {
		addr, err := netip.ParseAddr(host)
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return "", &NameError{host, "not an IPv6 address (a zone, or a port, is refused)"}
		}
		return addr.Unmap().String(), nil
	}
	h := strings.TrimSuffix(asciiLower(host), ".")
	if h == "localhost" {
		return h, nil
	}
	if looksNumeric(h) {
		addr, err := netip.ParseAddr(h)
		if err != nil || !addr.Is4() {
			return "", &NameError{host, "not a canonical IPv4 address (a name's last label is never a number)"}
		}
		return h, nil
	}
	if reason := checkDNSName(h); reason != "" {
		return "", &NameError{host, reason}
	}
	return h, nil
}

// asciiLower folds A-Z only: Unicode case folding would turn the Kelvin
// sign into an ASCII k, and a name that is not ASCII must stay refused.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
