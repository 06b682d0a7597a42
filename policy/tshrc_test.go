package policy

import (
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

var stdScope = TshrcScope{Root: "/ctx", UID: 1000, Home: "/ctx/home/1000"}

func TestParseTshrc(t *testing.T) {
	custom := TshrcScope{Root: "/tmp/r", UID: 0, Home: "/tmp/r/home/0"}
	otherHome := TshrcScope{Root: "/ctx", UID: 1000, Home: "/srv/me"}
	ok := []struct {
		name  string
		in    string
		scope TshrcScope
		want  []string
	}{
		{"system and user", "CTX_PATH=/ctx/tool:/ctx/home/1000/tool\n", stdScope,
			[]string{"/ctx/tool", "/ctx/home/1000/tool"}},
		{"user first, shared, comments", "# mine first\n\n  CTX_PATH=/ctx/home/1000/tool:/ctx/shared/project-a/tool:/ctx/tool  \n# end\n", stdScope,
			[]string{"/ctx/home/1000/tool", "/ctx/shared/project-a/tool", "/ctx/tool"}},
		{"re-rooted", "CTX_PATH=/ctx/tool:/ctx/home/0/tool:/ctx/shared/s/tool", custom,
			[]string{"/tmp/r/tool", "/tmp/r/home/0/tool", "/tmp/r/shared/s/tool"}},
		{"custom root spelled out", "CTX_PATH=/tmp/r/tool", custom, []string{"/tmp/r/tool"}},
		{"CTX_HOME outside the root", "CTX_PATH=/srv/me/tool:/ctx/tool", otherHome, []string{"/srv/me/tool", "/ctx/tool"}},
		{"CRLF", "CTX_PATH=/ctx/tool\r\n", stdScope, []string{"/ctx/tool"}},
		{"duplicate component allowed", "CTX_PATH=/ctx/tool:/ctx/tool", stdScope, []string{"/ctx/tool", "/ctx/tool"}},
	}
	for _, tc := range ok {
		got, err := ParseTshrc([]byte(tc.in), tc.scope)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ParseTshrc = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	bad := []struct {
		in   string
		line int
		want string
	}{
		{"", 0, "no CTX_PATH= line"},
		{"# only a comment\n", 0, "no CTX_PATH= line"},
		{"export CTX_PATH=/ctx/tool", 1, `"export" is shell syntax`},
		{"PATH=/ctx/tool", 1, `unknown key "PATH"`},
		{"ctx_path=/ctx/tool", 1, "unknown key"},
		{"CTX_PATH /ctx/tool", 1, "not CTX_PATH=DIR:DIR"},
		{"CTX_PATH=/ctx/tool\nCTX_PATH=/ctx/tool", 2, "given twice (first on line 1)"},
		{"CTX_PATH=", 1, "CTX_PATH is empty"},
		{`CTX_PATH="/ctx/tool"`, 1, "quotes are shell syntax"},
		{"CTX_PATH=/ctx/tool::/ctx/home/1000/tool", 1, "component 2: empty directory"},
		{"CTX_PATH=/ctx/tool:", 1, "component 2: empty directory"},
		{"CTX_PATH=ctx/tool", 1, "component 1: \"ctx/tool\" is not absolute"},
		{"CTX_PATH=/ctx/tool/", 1, "not a clean path"},
		{"CTX_PATH=/ctx//tool", 1, "not a clean path"},
		{"CTX_PATH=/ctx/home/1000/../0/tool", 1, "not a clean path"},
		{"CTX_PATH=/usr/bin", 1, "is not a tool tier"},
		{"CTX_PATH=/ctx/tool:/ctx/home/0/tool", 1, "component 2: \"/ctx/home/0/tool\" is not a tool tier"},
		{"CTX_PATH=/ctx/agent", 1, "not a tool tier"},
		{"CTX_PATH=/ctx/shared/.x/tool", 1, "not a tool tier"},
		{"CTX_PATH=/ctx/shared/a/b/tool", 1, "not a tool tier"},
		{"CTX_PATH=/ctx/shared/a/tool/x", 1, "not a tool tier"},
		{"CTX_PATH=/ctx", 1, "not a tool tier"},
		{"CTX_PATH = /ctx/tool", 1, "unknown key"},
		{"\n\nCTX_PATH=/ctx/tool\x00", 3, "NUL byte"},
	}
	for _, tc := range bad {
		_, err := ParseTshrc([]byte(tc.in), stdScope)
		var se *ControlError
		if !errors.As(err, &se) {
			t.Errorf("ParseTshrc(%q) err = %v, want *ControlError", tc.in, err)
			continue
		}
		if se.Line != tc.line || !strings.Contains(se.Error(), tc.want) {
			t.Errorf("ParseTshrc(%q) = %q (line %d), want line %d containing %q", tc.in, se.Error(), se.Line, tc.line, tc.want)
		}
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("ParseTshrc(%q): error does not unwrap to EINVAL", tc.in)
		}
	}
}

func TestTshrcErrorNamesAllowedTiers(t *testing.T) {
	_, err := ParseTshrc([]byte("CTX_PATH=/etc"), TshrcScope{Root: "/tmp/r", UID: 7, Home: "/tmp/r/home/7"})
	want := `line 1: component 1: "/etc" is not a tool tier (allowed: /tmp/r/tool, /tmp/r/home/7/tool, /tmp/r/shared/SPACE/tool)`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant    %s", err, want)
	}
}

func TestTshrcErrorNamesCtxHomeTier(t *testing.T) {
	_, err := ParseTshrc([]byte("CTX_PATH=/etc"), TshrcScope{Root: "/ctx", UID: 7, Home: "/srv/me"})
	want := `line 1: component 1: "/etc" is not a tool tier (allowed: /ctx/tool, /ctx/home/7/tool, /srv/me/tool, /ctx/shared/SPACE/tool)`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant    %s", err, want)
	}
}

func TestIsToolTier(t *testing.T) {
	for dir, want := range map[string]bool{
		"/ctx/tool":              true,
		"/ctx/home/1000/tool":    true,
		"/ctx/shared/p-1/tool":   true,
		"/ctx/home/1001/tool":    false,
		"/ctx/shared/tool":       false,
		"/ctx/shared//tool":      false,
		"/ctx/shared/x.d/tool":   false,
		"/ctx/toolx":             false,
		"/ctxx/tool":             false,
		"/ctx/home/1000/tool/ab": false,
	} {
		if got := IsToolTier(dir, stdScope); got != want {
			t.Errorf("IsToolTier(%q) = %v, want %v", dir, got, want)
		}
	}
}

func FuzzTshrc(f *testing.F) {
	f.Add([]byte("CTX_PATH=/ctx/tool:/ctx/home/1000/tool\n"))
	f.Add([]byte("# c\nCTX_PATH=/ctx/shared/a/tool\r\n"))
	f.Add([]byte("export CTX_PATH=/usr/bin"))
	f.Add([]byte("CTX_PATH=/ctx/tool:/ctx/../tool"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, scope := range []TshrcScope{stdScope, {Root: "/r", UID: 0, Home: "/h"}} {
			dirs, err := ParseTshrc(data, scope)
			if err != nil {
				var se *ControlError
				if !errors.As(err, &se) {
					t.Fatalf("error %v is not a ControlError", err)
				}
				continue
			}
			if len(dirs) == 0 {
				t.Fatal("accepted a .tshrc without directories")
			}
			for _, d := range dirs {
				if !IsToolTier(d, scope) {
					t.Fatalf("accepted %q, which is not a tool tier of %+v", d, scope)
				}
			}
		}
	})
}
