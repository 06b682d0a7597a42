package policy

import (
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	ok := []string{"a", "Z", "0", "coder", "fs.read", "a+b", "a_b", "a-b", "x.sockx", "x.dd",
		"github.search_issues", strings.Repeat("a", 64), "a.", "a..b"}
	bad := []string{"", ".", "..", ".hidden", "-x", "_x", "+x", "a/b", "a b", "a\x00", "a\n", "é",
		"tool.sock", "tool.d", ".d", strings.Repeat("a", 65), "a\tb", "a:b", "a*", "a@b"}
	for _, s := range ok {
		if err := ValidName(s); err != nil {
			t.Errorf("ValidName(%q) = %v, want ok", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidName(s); err == nil {
			t.Errorf("ValidName(%q) = ok, want error", s)
		}
	}
}

func TestValidModelRef(t *testing.T) {
	ok := []string{"openai/gpt-5.6", "main", "helper", "a/b", "api.lmm.best/x"}
	bad := []string{"openai", "openai/", "/gpt", "a/b/c", "Main", "fast", "openai/gpt.sock", ""}
	for _, s := range ok {
		if err := ValidModelRef(s); err != nil {
			t.Errorf("ValidModelRef(%q) = %v, want ok", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidModelRef(s); err == nil {
			t.Errorf("ValidModelRef(%q) = ok, want error", s)
		}
	}
}

// FuzzValidName checks the validator against a direct restatement of the
// grammar: [A-Za-z0-9][A-Za-z0-9._+-]{0,63}, not ending in .sock or .d.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"coder", "fs.read", "x.sock", "a.d", "", "..", strings.Repeat("b", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := len(s) >= 1 && len(s) <= 64 && !strings.HasSuffix(s, ".sock") && !strings.HasSuffix(s, ".d")
		for i := 0; want && i < len(s); i++ {
			c := s[i]
			alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
			want = alnum || i > 0 && strings.IndexByte("._+-", c) >= 0
		}
		if got := ValidName(s) == nil; got != want {
			t.Fatalf("ValidName(%q) valid=%v, want %v", s, got, want)
		}
	})
}
