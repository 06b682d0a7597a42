package ptyterm

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// controlFiltered runs in through a fresh filter cut at the given points.
func controlFiltered(in []byte, cuts ...int) []byte {
	var f ControlFilter
	var out []byte
	last := 0
	for _, c := range append(cuts, len(in)) {
		c = max(last, min(c, len(in)))
		out = append(out, f.Filter(nil, in[last:c])...)
		last = c
	}
	return out
}

// startsString reports where out could make a terminal start a control
// string: an ESC not followed by a plain final or intermediate byte, or
// an introducer (ESC ] P X ^ _), a C1 string control as a code point, or
// a raw one outside a valid rune.
func startsString(out []byte) (int, bool) {
	for i := 0; i < len(out); {
		c := out[i]
		if c == 0x1b {
			if i+1 >= len(out) || out[i+1] < 0x20 || out[i+1] > 0x7e || stringIntroducer(out[i+1]) {
				return i, true
			}
			i += 2
			continue
		}
		r, n := utf8.DecodeRune(out[i:])
		if stringC1(r) || r == utf8.RuneError && n == 1 && stringC1(rune(c)) {
			return i, true
		}
		i += n
	}
	return 0, false
}

// TestControlFilterDropsStrings: what a hostile agent prints to retitle
// the watcher's window, write or read its clipboard, or send device
// control strings, in every form, is dropped; the text around it passes.
func TestControlFilterDropsStrings(t *testing.T) {
	for _, seq := range []string{
		"\x1b]52;c;cm0gLXJmIH4K\a", "\x1b]52;c;?\x1b\\", "\x1b]0;pwned\a", "\x1b]1;icon\x1b\\", "\x1b]2;title\a",
		"\x9d0;eight-bit\a", "\x9d52;c;eA==\x9c", "\u009d2;code point\u009c", "\u009d0;t\a",
		"\x1bP$q\"p\x1b\\", "\x90+q544e\x9c", "\u0090x\a", "\x1b_apc\x1b\\", "\x9fapc\a", "\x1b^pm\a", "\x9epm\a",
		"\x1bXsos\x1b\\", "\x98sos\x9c", "\x1b\x1b]0;double\a", "\x1b\a]0;bel-between\a", "\x1b]0;can\x18",
	} {
		in := []byte("left " + seq + " right")
		for cut := 0; cut <= len(in); cut++ {
			out := controlFiltered(in, cut)
			want := "left  right"
			if strings.HasPrefix(seq, "\x1b\a") {
				want = "left \a right" // BEL is executed within ESC
			}
			if string(out) != want {
				t.Fatalf("%q cut at %d: %q, want %q", in, cut, out, want)
			}
		}
	}
}

// TestControlFilterPassesNormalOutput: colors, cursor movement, other
// escape sequences, UTF-8 text and a ST on its own pass byte for byte.
func TestControlFilterPassesNormalOutput(t *testing.T) {
	normal := "\x1b[1;31mred\x1b[0m \x1b[38;5;208mé 中 🙂 ǝ\x1b[m\r\n\x1b[2J\x1b[H\x1b[10;20H\x1b[A\x1b[?1049h\x1b[?25l" +
		"\x1b7\x1b8\x1b=\x1b>\x1b(B\x1b)0\x1bM\x1b[6n\x1b[?2004h\t\b\a done \x1b\\ \x9b31m \u009b2J"
	for cut := 0; cut <= len(normal); cut++ {
		if out := controlFiltered([]byte(normal), cut, cut+3); string(out) != normal {
			t.Fatalf("cut at %d: %q", cut, out)
		}
	}
	// Passing whole input allocates nothing: the input is returned.
	var f ControlFilter
	p := []byte("plain \x1b[32mgreen\x1b[0m ü\n")
	if out := f.Filter(nil, p); &out[0] != &p[0] {
		t.Errorf("plain output was copied")
	}
}

// TestControlFilterBounds: an unterminated string hides at most
// maxControlString bytes; a UTF-8 rune cut by a dropped string never
// joins with the byte after it.
func TestControlFilterBounds(t *testing.T) {
	in := append([]byte("\x1b]0;"), bytes.Repeat([]byte{'A'}, maxControlString+10)...)
	if out := controlFiltered(in, 7, 70000); len(out) != 11 {
		t.Errorf("after the bound, %d bytes passed, want 11", len(out))
	}
	// C2 then a dropped string then 9D: the terminal must not see C2 9D.
	out := controlFiltered([]byte("\xc2\x1b]0;x\a\x9d0;y\a"), 1, 5)
	if _, bad := startsString(out); bad || bytes.Contains(out, []byte("\xc2\x9d")) {
		t.Errorf("joined across a dropped string: %q", out)
	}
}

// FuzzControlFilter: for any input cut anywhere, the result does not
// depend on the cut, never lets a terminal start a control string, and
// input with no ESC and no byte above 0x7F passes unchanged.
func FuzzControlFilter(f *testing.F) {
	f.Add([]byte("\x1b]52;c;eA==\a\x1b[31mx"), 3, 9)
	f.Add([]byte("\xc2\x9d0;t\x9c\xc7\x9d"), 1, 2)
	f.Add([]byte("\x1b\x1b]\x1bP\x1b\\\x90\x9c"), 2, 4)
	f.Add([]byte("é\xe0\x80\x9b\xf0\x9f\x99"), 1, 5)
	f.Fuzz(func(t *testing.T, in []byte, a, b int) {
		if a < 0 {
			a = -a
		}
		if b < 0 {
			b = -b
		}
		a %= len(in) + 1
		b %= len(in) + 1
		a, b = min(a, b), max(a, b)
		whole := controlFiltered(in)
		split := controlFiltered(in, a, b)
		if !bytes.Equal(whole, split) {
			t.Fatalf("cut at %d,%d changes the result: %q vs %q", a, b, whole, split)
		}
		if i, bad := startsString(whole); bad {
			t.Fatalf("%q -> %q: a string can start at %d", in, whole, i)
		}
		plain := true
		for _, c := range in {
			if c == 0x1b || c >= 0x80 {
				plain = false
			}
		}
		if plain && !bytes.Equal(whole, in) {
			t.Fatalf("plain input changed: %q -> %q", in, whole)
		}
	})
}

// BenchmarkControlFilter measures the filter alone on terminal output:
// ASCII lines, and UTF-8 text with colors.
func BenchmarkControlFilter(b *testing.B) {
	for _, c := range []struct{ name, line string }{
		{"ascii", strings.Repeat("0123456789abcdef", 4)[:63] + "\n"},
		{"utf8-sgr", "\x1b[1;32mok\x1b[0m grüße 中文 ✓ \x1b[38;5;208mwarn\x1b[m résumé naïve\r\n"},
	} {
		p := bytes.Repeat([]byte(c.line), (32<<10)/len(c.line))
		b.Run(c.name, func(b *testing.B) {
			var f ControlFilter
			dst := make([]byte, 0, len(p))
			b.SetBytes(int64(len(p)))
			for i := 0; i < b.N; i++ {
				dst = f.Filter(dst[:0], p)
			}
		})
	}
}
