package policy

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestParseProtect(t *testing.T) {
	entries, err := ParseProtect([]byte("**/.git\n!**/.idea\n.tool/bin\r\nMakefile"))
	if err != nil {
		t.Fatal(err)
	}
	want := []ProtectEntry{
		{ProtectPattern: ProtectPattern{".git", true}},
		{ProtectPattern: ProtectPattern{".idea", true}, Remove: true},
		{ProtectPattern: ProtectPattern{".tool/bin", false}},
		{ProtectPattern: ProtectPattern{"Makefile", false}},
	}
	if !reflect.DeepEqual(entries, want) {
		t.Fatalf("got %+v", entries)
	}
	if got := string(FormatProtect(entries)); got != "**/.git\n!**/.idea\n.tool/bin\nMakefile\n" {
		t.Errorf("formatted %q", got)
	}
	if e, err := ParseProtect(nil); err != nil || e != nil {
		t.Errorf("empty file: %v %v", e, err)
	}
	// There is no comment syntax: "#" is an ordinary byte of a file name.
	if e, err := ParseProtect([]byte("# notes\n")); err != nil || e[0].Path != "# notes" {
		t.Errorf("# line: %v %v", e, err)
	}
}

func TestParseProtectRefusals(t *testing.T) {
	tests := []struct {
		data string
		line int
		kind ErrorKind
		says string
	}{
		{"/etc/passwd\n", 1, KindInvalidPath, "absolute"},
		{".git\n../x\n", 2, KindInvalidPath, "has a .. component"},
		{"a/./b\n", 1, KindInvalidPath, "has a . component"},
		{"a//b\n", 1, KindInvalidPath, "empty component"},
		{".vscode/\n", 1, KindInvalidPath, "ends in /"},
		{"*.sh\n", 1, KindInvalidPath, "glob"},
		{"a/**/b\n", 1, KindInvalidPath, "glob"},
		{"src/[ab]\n", 1, KindInvalidPath, "glob"},
		{"**/\n", 1, KindInvalidPath, "names no path"},
		{"!\n", 1, KindInvalidPath, "names no path"},
		{"!!.git\n", 1, KindInvalidPath, "may not start with !"},
		{".git\n\n.envrc\n", 2, KindInvalidPath, "empty line"},
		{"a\tb\n", 1, KindInvalidPath, "control byte"},
		{".envrc\n.envrc\n", 2, KindDuplicate, "already on line 1"},
		{"**/.envrc\n.envrc\n", 2, KindDuplicate, "overlaps"},
		{"!**/.git\n**/.git\n", 2, KindDuplicate, "already on line 1"},
		{"!.git\n", 1, KindInvalidValue, "not a default entry"},
		{"!Makefile\n", 1, KindInvalidValue, "not a default entry"},
		{strings.Repeat("a", 256) + "\n", 1, KindInvalidPath, "longer than 255"},
		{strings.Repeat("a/", 2100) + "a\n", 1, KindInvalidPath, "longer than 4096"},
	}
	for _, tt := range tests {
		_, err := ParseProtect([]byte(tt.data))
		var ce *ControlError
		if !errors.As(err, &ce) || ce.Control != "protect" || ce.Line != tt.line || ce.Kind != tt.kind || ce.Field != "path" ||
			!strings.Contains(ce.Error(), tt.says) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%q: %v (%+v)", tt.data, err, ce)
		}
	}
}

func TestEffectiveProtect(t *testing.T) {
	if got := EffectiveProtect(nil); !reflect.DeepEqual(got, defaultProtect) {
		t.Errorf("no control: %v", got)
	}
	// The shipped form (every default written out) is the default set.
	shipped, err := ParseProtect(FormatProtect(DefaultProtectEntries()))
	if err != nil {
		t.Fatal(err)
	}
	if got := EffectiveProtect(shipped); !reflect.DeepEqual(got, defaultProtect) {
		t.Errorf("shipped defaults: %v", got)
	}
	// A default left out of the file is still protected; only ! removes.
	entries, _ := ParseProtect([]byte("!**/.git\n.git/hooks\n.git/config\nscripts/hooks\n"))
	got := EffectiveProtect(entries)
	if ProtectCovers(got, ProtectPattern{".git", true}) || ProtectCovers(got, ProtectPattern{".git", false}) {
		t.Errorf(".git still protected after !**/.git: %v", got)
	}
	for _, p := range []ProtectPattern{{".git/hooks", false}, {".git/config", false}, {"scripts/hooks", false}, {".envrc", true}, {".ssh", false}} {
		if !ProtectCovers(got, p) {
			t.Errorf("%v not in %v", p, got)
		}
	}
	if len(got) != len(defaultProtect)-1+3 {
		t.Errorf("effective set of %d: %v", len(got), got)
	}
}

func TestDefaultProtectIsValid(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range defaultProtect {
		if seen[p.Path] {
			t.Errorf("%s twice", p.Path)
		}
		seen[p.Path] = true
		if _, err := ParseProtect([]byte(p.String() + "\n")); err != nil {
			t.Errorf("default %s: %v", p, err)
		}
		if _, err := ParseProtect([]byte("!" + p.String() + "\n")); err != nil {
			t.Errorf("!%s: %v", p, err)
		}
	}
	if !seen[".git"] {
		t.Error(".git is not a default")
	}
}

func TestProtectCovers(t *testing.T) {
	set := []ProtectPattern{{".git", true}, {".ssh", false}}
	for _, tt := range []struct {
		p    ProtectPattern
		want bool
	}{
		{ProtectPattern{".git", true}, true},
		{ProtectPattern{".git", false}, true},
		{ProtectPattern{".ssh", false}, true},
		{ProtectPattern{".ssh", true}, false},
		{ProtectPattern{".envrc", false}, false},
	} {
		if got := ProtectCovers(set, tt.p); got != tt.want {
			t.Errorf("%v: %v", tt.p, got)
		}
	}
}

func TestAttenuateProtect(t *testing.T) {
	parent := mustAgent(t, "coder", coderControls())
	child := mustAgent(t, "coder", coderControls())
	if err := Attenuate(parent, child); err != nil {
		t.Fatalf("same defaults: %v", err)
	}
	// The child may protect more.
	more := mustAgent(t, "coder", withControls(coderControls(), "protect", "Makefile\n"))
	if err := Attenuate(parent, more); err != nil {
		t.Errorf("child protecting more: %v", err)
	}
	// Never less: a default taken out, or a parent's addition missing.
	less := mustAgent(t, "coder", withControls(coderControls(), "protect", "!**/.vscode\n"))
	var ae *AttenuationError
	if err := Attenuate(parent, less); !errors.As(err, &ae) || ae.Control != "protect" || !strings.Contains(err.Error(), ".vscode") {
		t.Errorf("child without .vscode: %v", err)
	}
	if err := Attenuate(more, child); !errors.As(err, &ae) || !strings.Contains(err.Error(), "Makefile") {
		t.Errorf("child without the parent's Makefile: %v", err)
	}
}

func TestParseGitFile(t *testing.T) {
	for in, want := range map[string]string{
		"gitdir: ../.git/modules/sub\n":            "../.git/modules/sub",
		"gitdir: /home/me/r/.git/worktrees/wt\r\n": "/home/me/r/.git/worktrees/wt",
		"gitdir: with space":                       "with space",
	} {
		if got, err := ParseGitFile([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "gitdir:x\n", "gitdir: \n", "ref: refs/heads/main\n", "gitdir: a\nb\n", "gitdir: a\x00b", "gitdir: " + strings.Repeat("a", 5000)} {
		if got, err := ParseGitFile([]byte(bad)); err == nil {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}

func FuzzParseProtect(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseProtect(data)
		if err != nil {
			checkControlError(t, "protect", data, err)
			return
		}
		canon := FormatProtect(entries)
		again, err := ParseProtect(canon)
		if err != nil || !reflect.DeepEqual(entries, again) || !bytes.Equal(FormatProtect(again), canon) {
			t.Fatalf("round trip of %q: %v", canon, err)
		}
		set := EffectiveProtect(entries)
		for _, p := range set {
			if strings.HasPrefix(p.Path, "/") || strings.Contains("/"+p.Path+"/", "/../") || p.Path == "" {
				t.Fatalf("effective path %q escapes the workspace", p.Path)
			}
		}
		// Nothing but a ! line takes a default out.
		for _, d := range defaultProtect {
			removed := false
			for _, e := range entries {
				removed = removed || (e.Remove && e.ProtectPattern == d)
			}
			if !removed && !ProtectCovers(set, d) {
				t.Fatalf("default %s dropped without a ! line by %q", d, data)
			}
		}
	})
}

func FuzzParseGitFile(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseGitFile(data)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\x1b") {
				t.Fatalf("error %q is not one safe line", err)
			}
			return
		}
		if p == "" || strings.ContainsAny(p, "\x00\r\n") {
			t.Fatalf("path %q from %q", p, data)
		}
		if again, err := ParseGitFile([]byte("gitdir: " + p + "\n")); err != nil || again != p {
			t.Fatalf("round trip of %q: %q %v", p, again, err)
		}
	})
}
