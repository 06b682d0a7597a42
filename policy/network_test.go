package policy

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestNetworkTargetGrammar: every shape of network object a rule may
// name, and the spellings refused, each with the reason a person reads.
func TestNetworkTargetGrammar(t *testing.T) {
	good := []struct {
		in, canon string
		kind      NetworkKind
		port      int
	}{
		{"default", "default", NetworkAll, 0},
		{"api.example.com", "api.example.com", NetworkHost, 0},
		{"api.example.com:8443", "api.example.com:8443", NetworkHost, 8443},
		{"api.example.com.", "api.example.com", NetworkHost, 0},
		{"api.example.com.:22", "api.example.com:22", NetworkHost, 22},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", NetworkHost, 0},
		{"a-b.c0.example", "a-b.c0.example", NetworkHost, 0},
		{"*.example.com", "*.example.com", NetworkWildcard, 0},
		{"*.example.com:443", "*.example.com:443", NetworkWildcard, 443},
		{"localhost:3000", "localhost:3000", NetworkLocalhost, 3000},
		{"localhost.:3000", "localhost:3000", NetworkLocalhost, 3000},
		{"192.0.2.10", "192.0.2.10", NetworkAddress, 0},
		{"10.1.2.3:5432", "10.1.2.3:5432", NetworkAddress, 5432},
		{"[2001:db8::1]:443", "[2001:db8::1]:443", NetworkAddress, 443},
		{"[fd00::5]", "[fd00::5]", NetworkAddress, 0},
		{"host.example:65535", "host.example:65535", NetworkHost, 65535},
	}
	for _, c := range good {
		got, err := ParseNetworkTarget(c.in)
		if err != nil {
			t.Errorf("%q refused: %v", c.in, err)
			continue
		}
		if got.Kind != c.kind || got.Port != c.port || got.String() != c.canon {
			t.Errorf("%q = %+v (%q), want kind %d port %d %q", c.in, got, got, c.kind, c.port, c.canon)
		}
	}
	bad := []struct{ in, reason string }{
		{"", "empty host name"},
		{"internet", "single label"},
		{"lan", "single label"},
		{"Default", "single label"},
		{"API.example.com", "lower case"},
		{"bücher.example", "not ASCII"},
		{"\u212aelvin.example", "not ASCII"},
		{"a..example.com", "empty label"},
		{".example.com", "empty label"},
		{"example.com..", "empty label"},
		{"-a.example.com", "hyphen"},
		{"a-.example.com", "hyphen"},
		{"ab--c.example.com", "places 3-4"},
		{strings.Repeat("a", 64) + ".example", "longer than 63"},
		{strings.Repeat("abcdefghi.", 26) + "example", "longer than 253"},
		{"a_b.example.com", `'_'`},
		{"a b.example.com", `' '`},
		{"a%2e.example.com", `'%'`},
		{"user@example.com", `'@'`},
		{"a\x00.example.com", `'\x00'`},
		{"a\r\n.example.com", `'\r'`},
		{"example.com:0", "no port 0"},
		{"example.com:080", "leading zero"},
		{"example.com:65536", "over 65535"},
		{"example.com:", "empty port"},
		{"example.com:+1", "not a decimal"},
		{"example.com:1:2", "more than one :"},
		{"localhost", "needs a port"},
		{"*", "single label"},
		{"*.com", "single label"},
		{"*.*.example.com", `'*'`},
		{"a.*.example.com", `'*'`},
		{"*example.com", `'*'`},
		{"1.2.3.4.5", "not an IP address"},
		{"example.123", "not an IP address"},
		{"example.0x7f", "not an IP address"},
		{"127.0.0.1:80", "localhost:PORT"},
		{"0.0.0.0", "not an address a connection reaches"},
		{"224.0.0.1", "not an address"},
		{"255.255.255.255", "not an address"},
		{"010.0.0.1", "not an IP address"},
		{"2001:db8::1", "more than one :"},
		{"[2001:db8::1", "lacks its ]"},
		{"[2001:db8::1]x", "after ]"},
		{"[2001:DB8::1]", "canonically"},
		{"[::1]:22", "localhost:PORT"},
		{"[::]", "not an address"},
		{"[::ffff:10.0.0.1]", "IPv4-mapped"},
		{"[fe80::1%eth0]", "zone"},
		{"[192.0.2.1]", "brackets"},
	}
	for _, c := range bad {
		_, err := ParseNetworkTarget(c.in)
		if err == nil {
			t.Errorf("%q accepted", c.in)
			continue
		}
		if !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%q: %v, want a reason with %q", c.in, err, c.reason)
		}
	}
}

// TestNetworkRulesInPolicyFiles: the policy grammar takes the network
// objects, stores them canonically (a final dot dropped), and refuses a
// bad one naming its line and field.
func TestNetworkRulesInPolicyFiles(t *testing.T) {
	p, err := ParsePolicy([]byte("allow a_t network:api.example.com. connect\nallow a_t network:*.example.org:8443 connect\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p.Format()); got != "allow a_t network:api.example.com connect\nallow a_t network:*.example.org:8443 connect\n" {
		t.Fatalf("canonical form %q", got)
	}
	if !p.Allows("a_t", Object{ClassNetwork, "api.example.com"}, PermConnect) {
		t.Fatal("canonical rule not allowed")
	}
	_, err = ParsePolicy([]byte("allow a_t network:default connect\nallow a_t network:Example.com connect\n"))
	var ce *ControlError
	if !errors.As(err, &ce) || ce.Line != 2 || ce.Field != "name" || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("bad network name: %v", err)
	}
	obj, err := ParseObject("network:api.example.com.:443")
	if err != nil || obj.Name != "api.example.com:443" {
		t.Fatalf("ParseObject = %v, %v", obj, err)
	}
	r, err := ParseRule("a_t", "network:x.example.com.", "connect")
	if err != nil || r.Object.Name != "x.example.com" {
		t.Fatalf("ParseRule = %v, %v", r, err)
	}
	// revoke finds a rule whatever final dot either spelling has
	out, removed, err := RemoveRule([]byte("allow a_t network:x.example.com connect\n"), r)
	if err != nil || !removed || len(out) != 0 {
		t.Fatalf("RemoveRule = %q %v %v", out, removed, err)
	}
}

func netGrants(t *testing.T, lines ...string) *NetworkGrants {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("allow a_t network:" + l + " connect\n")
	}
	b.WriteString("allow other_t network:default connect\n") // another subject's
	p, err := ParsePolicy([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return NetworkGrantsOf(p, "a_t")
}
