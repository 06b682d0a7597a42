package cli

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// displayUnsafe reports the first rune or byte of s a person's terminal
// would act on or that would reorder what it shows: a C0 or C1 control,
// DEL, a bidi control or mark, or a byte of invalid UTF-8. keep names the
// controls allowed through (EscapeLines keeps newline and tab).
func displayUnsafe(s, keep string) (rune, bool) {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return rune(s[i]), true
			}
		}
		if strings.ContainsRune(keep, r) {
			continue
		}
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r == 0x061c || r == 0x200e || r == 0x200f ||
			r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			return r, true
		}
	}
	return 0, false
}

// hostileNames are what an agent names a directory or a tool to attack
// the person who lists it: clipboard write, window title, clear screen,
// 8-bit CSI raw and as a code point, C1 NEL, bidi override and isolate.
var hostileNames = []string{
	"\x1b]52;c;cm0gLXJmIH4K\a", "\x1b]0;pwned\x1b\\", "\x1b]2;t\a", "\x1b[2J\x1b[H",
	"\x9b31m", "\u009b2J", "a\u0085b", "photo\u202egpj.exe", "\u2066x\u2069", "\u200e\u200f\u061c",
	"\x7f\x00\r\t\n", "\xff\xfe", "é 中 🙂",
}

func TestEscapeHostileNames(t *testing.T) {
	for _, s := range hostileNames {
		got := Escape(s)
		if r, bad := displayUnsafe(got, ""); bad {
			t.Errorf("Escape(%q) = %q: %U left raw", s, got, r)
		}
		if Escape(got) != got {
			t.Errorf("Escape is not idempotent on %q", s)
		}
		lines := EscapeLines(s + "\n" + s + "\tz")
		if r, bad := displayUnsafe(lines, "\n\t"); bad {
			t.Errorf("EscapeLines(%q) = %q: %U left raw", s, lines, r)
		}
	}
	for in, want := range map[string]string{
		"\x1b]52;c;eA==\a": `\x1b]52;c;eA==\a`,
		"\x9b2J":           `\x9b2J`,
		"\u009b2J":         `\u009b2J`,
		"a\u202eb":         `a\u202eb`,
		"\u2067\u200f":     `\u2067\u200f`,
		"é 中 🙂":            "é 中 🙂",
		"a\tb\nc":          `a\tb\nc`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %s, want %s", in, got, want)
		}
	}
	if got := EscapeLines("a\tb\n\x1b[2Jc\n"); got != "a\tb\n\\x1b[2Jc\n" {
		t.Errorf("EscapeLines = %q", got)
	}
}

// TestCopyLinesEscapes: a file of lines an agent shaped (a run's policy,
// its audit) is copied with its lines and tabs, and nothing else raw.
func TestCopyLinesEscapes(t *testing.T) {
	in := strings.Join(hostileNames, "\n") + "\nlast\x1b]0;x\a"
	var out bytes.Buffer
	if err := CopyLines(&out, strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if r, bad := displayUnsafe(out.String(), "\n\t"); bad {
		t.Fatalf("%U reached the output: %q", r, out.String())
	}
	if !strings.HasSuffix(out.String(), `last\x1b]0;x\a`) {
		t.Errorf("last line: %q", out.String())
	}
}

// FuzzEscape: whatever the input, Escape's output holds no display
// control, is idempotent, and printable text passes unchanged;
// EscapeLines keeps exactly the input's newlines.
func FuzzEscape(f *testing.F) {
	for _, s := range hostileNames {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if r, bad := displayUnsafe(got, ""); bad {
			t.Fatalf("Escape(%q) = %q: %U raw", s, got, r)
		}
		if Escape(got) != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, Escape(got))
		}
		if _, bad := displayUnsafe(s, ""); !bad && got != s && safe(s) {
			t.Fatalf("safe text changed: %q -> %q", s, got)
		}
		lines := EscapeLines(s)
		if r, bad := displayUnsafe(lines, "\n\t"); bad {
			t.Fatalf("EscapeLines(%q) = %q: %U raw", s, lines, r)
		}
		if strings.Count(lines, "\n") != strings.Count(s, "\n") {
			t.Fatalf("EscapeLines changed the lines: %q -> %q", s, lines)
		}
	})
}
