package cli

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape is the one function through which ctx shows a person text it did
// not write itself: names, paths, details, errors, policy and audit lines
// that came from an agent, a tool, an MCP server or the workspace (ctx
// man ctx, UNTRUSTED TEXT). Every rune a terminal could act on or that
// could make the text read other than it is becomes a visible Go-style
// escape:
//
//   - C0 controls, newline and tab included (\n, \t, \x1b, \a, ...), and
//     DEL (\x7f);
//   - C1 controls as code points (\u009b) and every byte of invalid UTF-8
//     (\x9b, \xff): a raw 8-bit C1 byte is invalid UTF-8;
//   - bidirectional overrides, embeddings and isolates (\u202e, \u2066)
//     and the marks U+200E, U+200F and U+061C, which reorder what is
//     displayed;
//   - every other rune Go does not count as printable (format characters
//     such as zero-width spaces, separators, private use, unassigned).
//
// Printable text, including non-ASCII letters, is unchanged, and so is a
// backslash: escaping is idempotent (text escaped before passes as it is),
// at the price that a name holding a literal "\x1b" looks like one
// holding ESC.
func Escape(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case printable(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// EscapeLines is Escape for text of several lines (a policy file, audit
// lines, a tool's description): newlines and tabs are kept, every other
// rune Escape escapes is escaped.
func EscapeLines(s string) string {
	if safeText(s, true) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		parts := strings.Split(l, "\t")
		for j, p := range parts {
			parts[j] = Escape(p)
		}
		lines[i] = strings.Join(parts, "\t")
	}
	return strings.Join(lines, "\n")
}

// safe reports whether Escape leaves s as it is. Plain ASCII, the common
// case, is decided without decoding.
func safe(s string) bool { return safeText(s, false) }

// safeText is safe, with newline and tab allowed when lines is set.
func safeText(s string, lines bool) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return safeRunes(s[i:], lines)
		}
	}
	return true
}

func safeRunes(s string, lines bool) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return false
			}
		}
		if !printable(r) && !(lines && (r == '\n' || r == '\t')) {
			return false
		}
	}
	return true
}

// printable is the one rule: what Go counts as printable, and the space.
// Go's printable set holds no control, no format character (Cf: the bidi
// controls U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C, and
// zero-width characters) and no separator but the space.
func printable(r rune) bool {
	return r == ' ' || unicode.IsPrint(r)
}

// CopyLines copies r to w line by line through EscapeLines: a file of
// untrusted lines (a run's policy, its audit) shown to a person. A last
// line without a newline is copied too, escaped the same way.
func CopyLines(w io.Writer, r io.Reader) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			if _, werr := io.WriteString(w, EscapeLines(line)); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
