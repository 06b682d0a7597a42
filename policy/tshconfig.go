package policy

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// The tsh runtime configuration, tool/tsh.d/config. It is data, never shell
// code:
//
//	# comment
//	max_loaded_tools=64
//	cache_capacity=32
//	window_percent=1
//
// Blank lines and lines whose first non-blank byte is '#' are ignored;
// spaces and tabs around a whole line are trimmed (a CR before the LF is
// dropped). Every other line is KEY=VALUE with no blanks around '=', one of
// the three keys at most once, and VALUE a canonical positive decimal
// integer (no sign, no leading zero) inside the key's range. A key that is
// absent keeps its default.

// TshConfig holds the three tsh settings.
type TshConfig struct {
	MaxLoadedTools int // unpinned tool-metadata entries kept in a tsh context
	CacheCapacity  int // unpinned entries of the W-TinyLFU tool-path cache
	WindowPercent  int // share of CacheCapacity given to the admission window
}

// TshSetting describes one key of the tsh configuration.
type TshSetting struct {
	Key      string
	Min, Max int
	Default  int
	field    func(*TshConfig) *int
}

// TshSettings lists the keys in the order the normalized file writes them.
// The upper bounds keep a tsh process small whatever the file says: 1024
// entries matches the tool-listing bound, and a window is a percentage.
var TshSettings = []TshSetting{
	{"max_loaded_tools", 1, 1024, 64, func(c *TshConfig) *int { return &c.MaxLoadedTools }},
	{"cache_capacity", 1, 1024, 32, func(c *TshConfig) *int { return &c.CacheCapacity }},
	{"window_percent", 1, 100, 1, func(c *TshConfig) *int { return &c.WindowPercent }},
}

// DefaultTshConfig is the configuration used when the file is absent.
func DefaultTshConfig() TshConfig {
	var c TshConfig
	for _, s := range TshSettings {
		*s.field(&c) = s.Default
	}
	return c
}

// LookupTshSetting returns the setting called key.
func LookupTshSetting(key string) (TshSetting, bool) {
	for _, s := range TshSettings {
		if s.Key == key {
			return s, true
		}
	}
	return TshSetting{}, false
}

// Get returns the value of the setting in c.
func (s TshSetting) Get(c *TshConfig) int { return *s.field(c) }

// Parse checks that text is a canonical positive decimal integer (digits
// only, no sign, no leading zero) inside the setting's range.
func (s TshSetting) Parse(text string) (int, error) {
	v, err := parseTshInt(text)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", s.Key, err)
	}
	if v < s.Min || v > s.Max {
		return 0, fmt.Errorf("%s must be in %d..%d, not %d", s.Key, s.Min, s.Max, v)
	}
	return v, nil
}

// Set stores text, checked by Parse, in c.
func (s TshSetting) Set(c *TshConfig, text string) error {
	v, err := s.Parse(text)
	if err == nil {
		*s.field(c) = v
	}
	return err
}

// ParseTshConfig parses the tsh configuration file. Keys that are absent
// keep their defaults.
func ParseTshConfig(data []byte) (TshConfig, error) {
	c := DefaultTshConfig()
	seen := map[string]int{}
	err := tshLines(data, func(num int, line string) error {
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return syntaxErr(num, KindInvalidValue, "%s: not KEY=VALUE", tshQuote(line))
		}
		if strings.TrimRight(key, " \t") != key || strings.TrimLeft(value, " \t") != value {
			return syntaxErr(num, KindInvalidValue, "%s: no blanks around \"=\"", tshQuote(line))
		}
		s, ok := LookupTshSetting(key)
		if !ok {
			return syntaxErr(num, KindInvalidValue, "unknown key %s (known: max_loaded_tools, cache_capacity, window_percent)", tshQuote(key))
		}
		if first, dup := seen[key]; dup {
			return syntaxErr(num, KindDuplicate, "%s given twice (first on line %d)", key, first)
		}
		seen[key] = num
		v, err := s.Parse(value)
		if err != nil {
			return syntaxErr(num, KindInvalidValue, "%v", err)
		}
		*s.field(&c) = v
		return nil
	})
	return c, err
}

// Format returns the normalized file: one KEY=VALUE line per setting, in
// TshSettings order, no comments.
func (c TshConfig) Format() []byte {
	var b bytes.Buffer
	for _, s := range TshSettings {
		b.WriteString(s.Key)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(s.Get(&c)))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// parseTshInt parses a canonical positive decimal integer: digits only, no
// sign, no leading zero, at most 9 digits (so it fits an int on every
// platform and no range check can overflow).
func parseTshInt(s string) (int, error) {
	switch {
	case s == "":
		return 0, fmt.Errorf("empty value")
	case len(s) > 9:
		return 0, fmt.Errorf("%s is too large", tshQuote(s))
	case s[0] == '0':
		return 0, fmt.Errorf("%s is not a positive integer without leading zeros", tshQuote(s))
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%s is not a positive decimal integer", tshQuote(s))
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, nil
}

// tshLines calls fn with the 1-based number and the trimmed text of every
// line of data that is neither blank nor a comment. A CR right before a
// line end is dropped with the blanks. A NUL byte anywhere is an error:
// these are text files.
func tshLines(data []byte, fn func(num int, line string) error) error {
	num := 0
	for len(data) > 0 {
		num++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return syntaxErr(num, KindInvalidValue, "NUL byte in line")
		}
		text := strings.Trim(string(line), " \t\r")
		if text == "" || text[0] == '#' {
			continue
		}
		if err := fn(num, text); err != nil {
			return err
		}
	}
	return nil
}

// tshQuote renders an untrusted value for an error message: Go-quoted, so
// control bytes cannot reach a terminal, and cut to a recognisable length.
func tshQuote(s string) string {
	const max = 80
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
