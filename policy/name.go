// Package policy makes every authority decision of ctx and parses every
// control-file grammar. It is pure: it never touches the disk beyond the
// bytes it is handed, so each decision can be tested without a root.
package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest object name in bytes.
const MaxNameLen = 64

// NameError explains why a string is not a valid object name.
type NameError struct {
	Name   string
	Reason string
}

func (e *NameError) Error() string { return fmt.Sprintf("invalid name %q: %s", e.Name, e.Reason) }

// ValidName checks the object-name grammar shared by agents, tools, sessions,
// shared spaces, model components and policy subjects:
// [A-Za-z0-9][A-Za-z0-9._+-]{0,63}, not ending in ".sock" or ".d".
// The grammar excludes "/", NUL, control bytes, "." and "..".
func ValidName(s string) error {
	switch {
	case s == "":
		return &NameError{s, "empty"}
	case len(s) > MaxNameLen:
		return &NameError{s, fmt.Sprintf("longer than %d bytes", MaxNameLen)}
	case !isAlnum(s[0]):
		return &NameError{s, "must start with a letter or digit"}
	case strings.HasSuffix(s, ".sock"):
		return &NameError{s, `must not end in ".sock"`}
	case strings.HasSuffix(s, ".d"):
		return &NameError{s, `must not end in ".d"`}
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '+' && c != '-' {
			return &NameError{s, badByte(s, i)}
		}
	}
	return nil
}

// ValidModelName checks "provider/model": exactly one slash, both parts
// valid object names.
func ValidModelName(s string) error {
	provider, model, ok := strings.Cut(s, "/")
	if !ok {
		return &NameError{s, `model name must be "provider/model"`}
	}
	if err := ValidName(provider); err != nil {
		return &NameError{s, "provider: " + err.(*NameError).Reason}
	}
	if err := ValidName(model); err != nil {
		return &NameError{s, "model: " + err.(*NameError).Reason}
	}
	return nil
}

// ModelAliases are the model aliases accepted wherever a model reference is.
var ModelAliases = []string{"main", "helper"}

// ValidModelRef accepts a model name or one of ModelAliases.
func ValidModelRef(s string) error {
	for _, a := range ModelAliases {
		if s == a {
			return nil
		}
	}
	return ValidModelName(s)
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// badByte words the refusal of byte i of s. A byte of a UTF-8 character
// is shown as that character ("é", U+00E9), not as the Latin-1 reading of
// its first byte ('Ã'), which named a character the person never typed;
// an invisible or control character is escaped by %q.
func badByte(s string, i int) string {
	c := s[i]
	if c < utf8.RuneSelf {
		return fmt.Sprintf("byte %d (%q) is not one of A-Z a-z 0-9 . _ + -", i, c)
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("byte %d (0x%02x, not UTF-8) is not one of A-Z a-z 0-9 . _ + -", i, c)
	}
	return fmt.Sprintf("byte %d starts the character %q (U+%04X), which is not one of A-Z a-z 0-9 . _ + -", i, string(r), r)
}
