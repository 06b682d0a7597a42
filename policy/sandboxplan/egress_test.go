package sandboxplan

import (
	"slices"
	"strings"
	"testing"

	"ctx/policy"
)

func grantsOf(t *testing.T, rules ...string) *policy.NetworkGrants {
	t.Helper()
	var b strings.Builder
	for _, r := range rules {
		b.WriteString("allow a_t network:" + r + " connect\n")
	}
	p, err := policy.ParsePolicy([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return policy.NetworkGrantsOf(p, "a_t")
}

// A namespace run listens where its grants need: the wildcard address at
// each port a name is granted on, 127.0.0.1 at a localhost port no name
// takes, never at the stub's port 53, the proxy at a port none of them
// takes.
func TestNamespaceEgress(t *testing.T) {
	e, skipped := NamespaceEgress(grantsOf(t, "api.example.com", "*.example.org:3128", "git.example.net:22",
		"localhost:5173", "localhost:443", "dns.example.com:53", "10.1.2.3:5432"))
	want := []string{"0.0.0.0:22", "0.0.0.0:80", "0.0.0.0:443", "0.0.0.0:3128", "127.0.0.1:5173"}
	if !slices.Equal(e.Forward, want) {
		t.Errorf("forward %q, want %q", e.Forward, want)
	}
	if e.Proxy != "127.0.0.1:3129" || e.DNS != "127.0.0.53:53" {
		t.Errorf("proxy %s dns %s", e.Proxy, e.DNS)
	}
	if len(skipped) != 1 || !strings.HasPrefix(skipped[0], "53:") {
		t.Errorf("skipped %q", skipped)
	}
	if err := e.validate(); err != nil {
		t.Error(err)
	}
	// No grant at all: the proxy and the stub, no forwarder.
	if e, _ := NamespaceEgress(nil); e.Proxy != "127.0.0.1:3128" || len(e.Forward) != 0 {
		t.Errorf("no grants: %+v", e)
	}
}

// The proxy variables replace whatever the agent's env control set, in
// either case: in a run with egress the proxy is the only way out.
func TestProxyEnv(t *testing.T) {
	env := ProxyEnv([]string{"PATH=/bin", "http_proxy=http://evil:1", "No_Proxy=*", "HTTPS_PROXY=x"}, "127.0.0.1:3128")
	for _, kv := range env {
		if strings.Contains(kv, "evil") || kv == "No_Proxy=*" || kv == "HTTPS_PROXY=x" {
			t.Errorf("the agent's %q survived", kv)
		}
	}
	for _, kv := range []string{"PATH=/bin", "HTTP_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"ALL_PROXY=socks5h://127.0.0.1:3128", "no_proxy=localhost,127.0.0.1,::1"} {
		if !slices.Contains(env, kv) {
			t.Errorf("%q missing from %q", kv, env)
		}
	}
}

// The init binds only what a valid plan names: loopback (or, for a
// forwarder, the wildcard address) IPv4 addresses with a port.
func TestEgressValidate(t *testing.T) {
	for _, e := range []Egress{
		{Proxy: "10.0.0.1:3128", DNS: "127.0.0.53:53"},
		{Proxy: "0.0.0.0:3128", DNS: "127.0.0.53:53"},
		{Proxy: "127.0.0.1:3128", DNS: "127.0.0.53:0"},
		{Proxy: "127.0.0.1:3128", DNS: "127.0.0.53:53", Forward: []string{"192.168.1.1:443"}},
		{Proxy: "127.0.0.1:3128", DNS: "127.0.0.53:53", Forward: []string{"[::1]:443"}},
		{Proxy: "127.0.0.1", DNS: "127.0.0.53:53"},
	} {
		if err := e.validate(); err == nil {
			t.Errorf("%+v: accepted", e)
		}
	}
}

// TestValidForward: the init binds a forwarder the run host orders during
// the run only at an IPv4 loopback or wildcard address and a real port
// other than the DNS stub's: never an outside address, IPv6, port 0 or a
// malformed one.
func TestValidForward(t *testing.T) {
	for _, ok := range []string{"0.0.0.0:443", "127.0.0.1:2222", "127.0.0.1:1", "0.0.0.0:65535"} {
		if err := ValidForward(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.1:80", "192.168.1.1:22", "[::]:80", "[::1]:80", "0.0.0.0:0", "0.0.0.0:53",
		"127.0.0.53:53", "0.0.0.0:65536", "0.0.0.0", "localhost:80", "", "0.0.0.0:-1", " 0.0.0.0:80", "[::ffff:127.0.0.1]:80"} {
		if err := ValidForward(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
