package ptyterm

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes untrusted text (tool descriptions, schema titles, names from
// MCP servers, file names) safe to print on a terminal: control characters,
// escape sequences and invalid UTF-8 are shown as Go-style escapes instead of
// reaching the terminal, where they could move the cursor, retitle the window
// or hide text. Printable text, including non-ASCII letters, is unchanged.
func Escape(s string) string {
	safe := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// EscapeLines is Escape for multi-line text: newlines and tabs are kept,
// every other control character is escaped.
func EscapeLines(s string) string {
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
