package policy

import "bytes"

// Line handling shared by every control grammar.
//
// A control file is a sequence of LF-terminated lines. The final LF may be
// missing (editors and `printf` without \n), and a CR immediately before a
// line end is dropped so files written on Windows still parse; `tools` alone
// insists on the canonical form (see ParseTools). Nothing else is trimmed:
// a value with leading or trailing blanks is refused by its grammar.

// eachLine calls fn for every line of data with its 1-based number, the line
// without its terminator (and without a CR before it), and whether the line
// was terminated by LF. An empty file has no lines. Iteration stops at the
// first error fn returns.
func eachLine(data []byte, fn func(num int, line []byte, terminated bool) error) error {
	num := 0
	for len(data) > 0 {
		num++
		line := data
		terminated := false
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data, terminated = data[:i], data[i+1:], true
		} else {
			data = nil
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if err := fn(num, line, terminated); err != nil {
			return err
		}
	}
	return nil
}

// singleLine returns the value of a one-line control: the first line without
// its terminator. A second line, even an empty one, is an error at line 2.
// An empty file yields the empty value; its grammar decides whether that is
// valid.
func singleLine(control string, data []byte) (string, error) {
	line, rest, _ := bytes.Cut(data, []byte{'\n'})
	if len(rest) > 0 {
		return "", controlErr(control, 2, "", KindExtraLine, "a one-line control has more than one line")
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return string(line), nil
}

// isSpace reports ASCII horizontal whitespace, the field separators of
// policy lines. Non-ASCII spaces are not separators: they make a field
// invalid instead of silently splitting it.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'
}

// HasControlByte reports a byte below 0x20 or DEL.
func HasControlByte(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
