package policy

import (
	"reflect"
	"strings"
	"testing"
)

// TestNetworkDecide: each request a proxy would hand over, as a hostile
// client might phrase it, and the decision with the rule that allows it
// or would.
func TestNetworkDecide(t *testing.T) {
	g := netGrants(t, "api.example.com", "*.registry.example:8443", "*.cdn.example",
		"git.example.org:22", "localhost:3000", "10.1.2.3:5432", "[2001:db8::7]")
	cases := []struct {
		host    string
		port    int
		allowed bool
		local   bool
		rule    string // allowing, or would-allow
		layer   Layer
	}{
		{"api.example.com", 443, true, false, "network:api.example.com", ""},
		{"API.Example.COM.", 80, true, false, "network:api.example.com", ""},
		{"api.example.com", 8080, false, false, "network:api.example.com:8080", LayerAgentPolicy},
		{"evil.example.com", 443, false, false, "network:evil.example.com", LayerAgentPolicy},
		{"example.com", 443, false, false, "network:example.com", LayerAgentPolicy},
		{"a.registry.example", 8443, true, false, "network:*.registry.example:8443", ""},
		{"a.b.registry.example", 8443, true, false, "network:*.registry.example:8443", ""},
		{"registry.example", 8443, false, false, "network:registry.example:8443", LayerAgentPolicy},
		{"a.registry.example", 443, false, false, "network:a.registry.example", LayerAgentPolicy},
		{"x.cdn.example", 443, true, false, "network:*.cdn.example", ""},
		{"xcdn.example", 443, false, false, "network:xcdn.example", LayerAgentPolicy},
		{"git.example.org", 22, true, false, "network:git.example.org:22", ""},
		{"localhost", 3000, true, true, "network:localhost:3000", ""},
		{"127.0.0.1", 3000, true, true, "network:localhost:3000", ""},
		{"::1", 3000, true, true, "network:localhost:3000", ""},
		{"localhost", 22, false, false, "network:localhost:22", LayerAgentPolicy},
		{"127.0.0.2", 3000, false, false, "network:127.0.0.2:3000", LayerAgentPolicy},
		{"10.1.2.3", 5432, true, true, "network:10.1.2.3:5432", ""},
		{"10.1.2.3", 443, false, false, "network:10.1.2.3", LayerAgentPolicy},
		{"93.184.216.34", 443, false, false, "network:93.184.216.34", LayerAgentPolicy},
		{"2001:db8::7", 443, true, true, "network:[2001:db8::7]", ""},
		{"2001:DB8:0::7", 80, true, true, "network:[2001:db8::7]", ""},
		{"::ffff:10.1.2.3", 5432, true, true, "network:10.1.2.3:5432", ""},
		// malformed: never a decision on a name
		{"api.example.com\x00.evil.com", 443, false, false, "", LayerRequest},
		{"api.example.com\r\nX: y", 443, false, false, "", LayerRequest},
		{"user@api.example.com", 443, false, false, "", LayerRequest},
		{"api%2eexample.com", 443, false, false, "", LayerRequest},
		{"fe80::1%eth0", 443, false, false, "", LayerRequest},
		{"0x7f.1", 443, false, false, "", LayerRequest},
		{"2130706433", 443, false, false, "", LayerRequest},
		{"intranet", 443, false, false, "", LayerRequest},
		{"\u212api.example.com", 443, false, false, "", LayerRequest},
		{"api.example.com", 0, false, false, "", LayerRequest},
		{"api.example.com", 65536, false, false, "", LayerRequest},
	}
	for _, c := range cases {
		d := g.Decide(c.host, c.port)
		wantRule := ""
		if c.rule != "" {
			wantRule = "allow a_t " + c.rule + " connect"
		}
		if d.Allowed != c.allowed || d.Local != c.local || d.Rule != wantRule || d.Layer != c.layer {
			t.Errorf("Decide(%q, %d) = %+v, want allowed %v local %v rule %q layer %q", c.host, c.port, d, c.allowed, c.local, wantRule, c.layer)
		}
		if d.Reason == "" || strings.ContainsAny(d.Reason, "\x00\r\n") {
			t.Errorf("Decide(%q, %d) reason %q", c.host, c.port, d.Reason)
		}
	}
}

// TestNetworkDefaultAndNothing: default allows every target, locals
// included (that run keeps the host's network); no grant allows nothing;
// another subject's rules are not this one's.
func TestNetworkDefaultAndNothing(t *testing.T) {
	all := netGrants(t, "default", "api.example.com")
	if d := all.Decide("10.0.0.1", 22); !d.Allowed || !d.Local || d.Rule != "allow a_t network:default connect" {
		t.Errorf("default: %+v", d)
	}
	none := netGrants(t)
	if d := none.Decide("api.example.com", 443); d.Allowed || d.Layer != LayerAgentPolicy {
		t.Errorf("nothing: %+v", d)
	}
	var nilGrants *NetworkGrants
	if d := nilGrants.Decide("api.example.com", 443); d.Allowed {
		t.Errorf("nil grants allow: %+v", d)
	}
	if _, ok := nilGrants.NameGranted("api.example.com"); ok {
		t.Error("nil grants grant a name")
	}
}

// TestNetworkNamesForDNSAndProc: what a DNS stub answers for, which ports
// a forwarder opens, and the lines the run's policy account lists.
func TestNetworkNamesForDNSAndProc(t *testing.T) {
	g := netGrants(t, "api.example.com", "api.example.com:8443", "*.example.org:22", "localhost:3000", "localhost:5173", "10.1.2.3", "api.example.com")
	for host, want := range map[string]bool{"api.example.com": true, "API.example.com.": true, "a.example.org": true,
		"example.org": false, "evil.example.com": false, "localhost": false, "10.1.2.3": false, "x\x00.example.org": false} {
		rule, ok := g.NameGranted(host)
		if ok != want || ok && !strings.HasPrefix(rule, "allow a_t network:") {
			t.Errorf("NameGranted(%q) = %q %v, want %v", host, rule, ok, want)
		}
	}
	if got := g.Ports("api.example.com"); !reflect.DeepEqual(got, []int{80, 443, 8443}) {
		t.Errorf("Ports(api) = %v", got)
	}
	if got := g.Ports("b.a.example.org"); !reflect.DeepEqual(got, []int{22}) {
		t.Errorf("Ports(wildcard) = %v", got)
	}
	if got := g.Ports("example.org"); got != nil {
		t.Errorf("Ports(bare suffix) = %v", got)
	}
	if got := g.LocalhostPorts(); !reflect.DeepEqual(got, []int{3000, 5173}) {
		t.Errorf("LocalhostPorts = %v", got)
	}
	want := []string{"network:default connect rejected agent-policy", "network:api.example.com connect granted",
		"network:api.example.com:8443 connect granted", "network:*.example.org:22 connect granted",
		"network:localhost:3000 connect granted", "network:localhost:5173 connect granted", "network:10.1.2.3 connect granted"}
	if got := g.ProcLines(); !reflect.DeepEqual(got, want) {
		t.Errorf("ProcLines =\n%q\nwant\n%q", got, want)
	}
	if got := netGrants(t, "default").ProcLines(); !reflect.DeepEqual(got, []string{"network:default connect granted"}) {
		t.Errorf("default ProcLines = %q", got)
	}
}

// TestNetworkRefusalNamesTheFix: an agent's refusal carries the ctx
// policy allow line that grants it, narrowest first.
func TestNetworkRefusalNamesTheFix(t *testing.T) {
	a := &Agent{Name: "coder", Subject: "coder_t", Policy: mustPolicy(t, "")}
	d := a.NetworkGrants().Decide("registry.npmjs.org", 443)
	if d.Fix != "ctx policy allow --in agent/coder.d/policy coder_t network:registry.npmjs.org connect" {
		t.Errorf("fix %q", d.Fix)
	}
	d = a.NetworkGrants().Decide("localhost", 5173)
	if d.Fix != "ctx policy allow --in agent/coder.d/policy coder_t network:localhost:5173 connect" {
		t.Errorf("fix %q", d.Fix)
	}
}

func mustPolicy(t *testing.T, text string) *Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNetworkExplainAndAttenuation: explain's agent-policy layer finds a
// rule covering the object, and a child's narrower network rule is within
// its parent's; a wider one is a widening.
func TestNetworkExplainAndAttenuation(t *testing.T) {
	parent := &Agent{Name: "p", Subject: "p_t", Policy: mustPolicy(t,
		"allow p_t network:*.example.com connect\nallow p_t network:git.example.org:22 connect\n")}
	explain := []struct {
		obj     string
		allowed bool
		covers  string
	}{
		{"network:*.example.com", true, "has \"allow p_t network:*.example.com connect\""},
		{"network:api.example.com:443", true, "which covers api.example.com on port 443"},
		{"network:api.example.com", true, "on ports 80 and 443"},
		{"network:*.a.example.com:80", true, "every name below a.example.com on port 80"},
		{"network:example.com", false, "nor one that covers it"},
		{"network:git.example.org", false, "nor one"},
		{"network:default", false, "no rule"},
		{"network:localhost:3000", false, "nor one"},
	}
	for _, c := range explain {
		obj, err := ParseObject(c.obj)
		if err != nil {
			t.Fatal(err)
		}
		d := Check(parent, View{}, obj, PermConnect, Facts{})
		if d.Allowed != c.allowed || len(d.Verdicts) != 1 || !strings.Contains(d.Verdicts[0].Reason, c.covers) {
			t.Errorf("explain %s = %+v, want allowed %v reason with %q", c.obj, d, c.allowed, c.covers)
		}
	}
	for rule, ok := range map[string]bool{
		"allow p_t network:api.example.com connect":      true,
		"allow p_t network:*.a.example.com:443 connect":  true,
		"allow p_t network:git.example.org:22 connect":   true,
		"allow p_t network:example.com connect":          false,
		"allow p_t network:git.example.org connect":      false,
		"allow p_t network:default connect":              false,
		"allow p_t network:localhost:22 connect":         false,
		"allow p_t network:api.example.com:8080 connect": false,
	} {
		child := *parent
		child.Policy = mustPolicy(t, rule+"\n")
		err := Attenuate(parent, &child)
		if (err == nil) != ok {
			t.Errorf("child with %q: %v, want within %v", rule, err, ok)
		}
	}
}
