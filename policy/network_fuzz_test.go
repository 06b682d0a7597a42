package policy

import (
	"errors"
	"strings"
	"testing"
)

// canonicalNetworkBytes are the bytes a canonical network name may hold.
const canonicalNetworkBytes = "abcdefghijklmnopqrstuvwxyz0123456789.-*:[]"

// FuzzParseNetworkTarget: an accepted network name renders canonically,
// parses back to itself, survives a policy file round trip, and its
// grant decides as it says (a wildcard never covers its bare suffix);
// a refusal is a one-line *NameError. The request side canonicalises
// idempotently to bytes a rule could name.
func FuzzParseNetworkTarget(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		checkNetworkTarget(t, s)
		checkNormalizeHost(t, s)
	})
}

func checkNetworkTarget(t *testing.T, s string) {
	tg, err := ParseNetworkTarget(s)
	if err != nil {
		var ne *NameError
		if !errors.As(err, &ne) || strings.ContainsAny(err.Error(), "\n\r\x1b") {
			t.Fatalf("error %T %q", err, err)
		}
		return
	}
	canon := tg.String()
	if strings.Trim(canon, canonicalNetworkBytes) != "" || canonicalNetworkName(s) != canon {
		t.Fatalf("%q: canonical %q", s, canon)
	}
	back, err := ParseNetworkTarget(canon)
	if err != nil || back != tg {
		t.Fatalf("%q: canonical %q parses to %+v, %v", s, canon, back, err)
	}
	p, err := ParsePolicy([]byte("allow a_t network:" + s + " connect\n"))
	if err != nil || string(p.Format()) != "allow a_t network:"+canon+" connect\n" {
		t.Fatalf("%q in a policy: %v %q", s, err, p.Format())
	}
	g := NetworkGrantsOf(p, "a_t")
	if _, ok := g.Covers(tg); !ok {
		t.Fatalf("%q does not cover itself", s)
	}
	for _, port := range tg.Ports() {
		switch tg.Kind {
		case NetworkHost, NetworkAddress:
			if d := g.Decide(tg.Host, port); !d.Allowed {
				t.Fatalf("%q refuses %s:%d: %+v", s, tg.Host, port, d)
			}
		case NetworkWildcard:
			if d := g.Decide("x."+tg.Host, port); !d.Allowed && len(tg.Host) < maxHostLen-2 {
				t.Fatalf("%q refuses x.%s:%d: %+v", s, tg.Host, port, d)
			}
			if d := g.Decide(tg.Host, port); d.Allowed {
				t.Fatalf("%q allows its bare suffix: %+v", s, d)
			}
		}
	}
}

func checkNormalizeHost(t *testing.T, s string) {
	h, err := NormalizeNetworkHost(s)
	if err != nil {
		if strings.ContainsAny(err.Error(), "\n\r\x1b") {
			t.Fatalf("error %q", err)
		}
		return
	}
	if strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789.-:") != "" || strings.HasSuffix(h, ".") {
		t.Fatalf("%q normalises to %q", s, h)
	}
	if again, err := NormalizeNetworkHost(h); err != nil || again != h {
		t.Fatalf("%q: %q normalises again to %q, %v", s, h, again, err)
	}
	if d := NetworkGrantsOf(nil, "a_t").Decide(s, 443); d.Allowed || d.Layer != LayerAgentPolicy {
		t.Fatalf("%q decided by no grant: %+v", s, d)
	}
}
