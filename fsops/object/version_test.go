package object

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, s := range []string{"0.1.7", "1.0.0-alpha.1", "1.0.0+build.5", "1.0.0-rc.1+x-y", "18446744073709551615.0.0"} {
		v, err := ParseVersion(s)
		if err != nil {
			t.Errorf("ParseVersion(%q): %v", s, err)
		} else if versionText(v) != s {
			t.Errorf("ParseVersion(%q).String() = %q", s, versionText(v))
		}
	}
	for _, s := range []string{"", "1", "1.2", "01.2.3", "1.2.3.4", "1.2.x", "v1.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "1.2.3-a..b", "1.2.3 ", "18446744073709551616.0.0", "1.2.3-é"} {
		if _, err := ParseVersion(s); err == nil {
			t.Errorf("ParseVersion(%q) accepted", s)
		}
	}
}

func TestVersionOrder(t *testing.T) {
	// SemVer 2.0.0 §11 example chain.
	chain := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"}
	for i := 0; i+1 < len(chain); i++ {
		a, _ := ParseVersion(chain[i])
		b, _ := ParseVersion(chain[i+1])
		if a.Compare(b) >= 0 || b.Compare(a) <= 0 {
			t.Errorf("%s should sort before %s", chain[i], chain[i+1])
		}
	}
}

func TestRequirementMatches(t *testing.T) {
	tests := []struct {
		req string
		yes string
		no  string
	}{
		{">=0.1.7, <0.2.0", "0.1.7 0.1.99", "0.1.6 0.2.0 1.0.0 0.1.8-rc.1"},
		{"^0.1", "0.1.0 0.1.7", "0.2.0 0.0.9"},
		{"^0.1.7", "0.1.7 0.1.9", "0.1.6 0.2.0"},
		{"^0.0.3", "0.0.3", "0.0.4 0.0.2"},
		{"^0.0", "0.0.0 0.0.9", "0.1.0"},
		{"^1.2", "1.2.0 1.9.9", "1.1.9 2.0.0"},
		{"^1", "1.0.0 1.9.9", "2.0.0 0.9.0"},
		{"0.1.7", "0.1.7 0.1.8", "0.2.0"},
		{"0.1", "0.1.0", "0.2.0"},
		{"=0.1.7", "0.1.7", "0.1.8 0.1.7-rc.1"},
		{"=0.1", "0.1.0 0.1.9", "0.2.0"},
		{"=0", "0.9.9", "1.0.0"},
		{"~0.1.5", "0.1.5 0.1.9", "0.1.4 0.2.0"},
		{"~1.2", "1.2.0 1.2.9", "1.3.0"},
		{"~1", "1.0.0 1.5.0", "2.0.0"},
		{">0.1", "0.2.0 1.0.0", "0.1.9"},
		{">0", "1.0.0", "0.9.0"},
		{">0.1.7", "0.1.8", "0.1.7"},
		{"<=0.1", "0.1.9 0.0.1", "0.2.0"},
		{"<=1", "1.9.0", "2.0.0"},
		{"<=0.1.7", "0.1.7", "0.1.8"},
		{"<1.2", "1.1.9", "1.2.0"},
		{"<1", "0.9.9", "1.0.0"},
		{"*", "0.0.1 9.9.9", "1.0.0-a"},
		{"0.1.*", "0.1.0 0.1.7", "0.2.0"},
		{"1.x", "1.2.3", "2.0.0"},
		{">= 0.1.7 ,  < 0.2.0", "0.1.7", "0.2.0"},
		{">=1.0.0-rc.1, <1.0.0", "1.0.0-rc.2", "1.0.0 1.0.1-rc.1"},
	}
	for _, tc := range tests {
		r, err := ParseRequirement(tc.req)
		if err != nil {
			t.Errorf("ParseRequirement(%q): %v", tc.req, err)
			continue
		}
		for _, s := range strings.Fields(tc.yes) {
			if !r.Matches(mustVersion(t, s)) {
				t.Errorf("%q should match %s", tc.req, s)
			}
		}
		for _, s := range strings.Fields(tc.no) {
			if r.Matches(mustVersion(t, s)) {
				t.Errorf("%q should not match %s", tc.req, s)
			}
		}
	}
}

func TestParseRequirementErrors(t *testing.T) {
	for _, s := range []string{"", " ", ">=0.1.7,", ",", ">=", "=>1.0.0", "1.2.3.4", "01.2", ">=*", "*.1", "1.*.2", ">1.*", "^1.2-rc.1", "1.2.3-", "v1", "a.b.c", ">=1.0.0 <2.0.0", strings.Repeat("1,", 40) + "1"} {
		if _, err := ParseRequirement(s); err == nil {
			t.Errorf("ParseRequirement(%q) accepted", s)
		}
	}
}

func mustVersion(t *testing.T, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The requirement ctx writes into its own manifests must match itself.
func TestOwnRequirementMatches(t *testing.T) {
	r, err := ParseRequirement(CortexFSRequirement)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Matches(mustVersion(t, CortexFSVersion)) {
		t.Fatalf("%q does not match %s", CortexFSRequirement, CortexFSVersion)
	}
}

func FuzzParseRequirement(f *testing.F) {
	for _, s := range []string{">=0.1.7, <0.2.0", "^0.1", "~1.2.3", "=1.0.0-rc.1+b", "1.*", "*", "<=2"} {
		f.Add(s, "0.1.7")
	}
	f.Fuzz(func(t *testing.T, req, ver string) {
		r, err := ParseRequirement(req)
		v, verr := ParseVersion(ver)
		if verr == nil && versionText(v) != ver {
			t.Fatalf("version %q round-trips as %q", ver, versionText(v))
		}
		if err != nil || verr != nil {
			return
		}
		_ = r.Matches(v)
	})
}

// versionText is v written out again, for the parser's round trip.
func versionText(v Version) string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if len(v.Pre) > 0 {
		s += "-" + strings.Join(v.Pre, ".")
	}
	if v.Build != "" {
		s += "+" + v.Build
	}
	return s
}
