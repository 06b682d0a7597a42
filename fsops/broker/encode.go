package broker

import (
	"unicode/utf8"
)

// A caller's Request is written by hand, not by encoding/json: a tool
// run by path is a fresh process that sends one request, and
// encoding/json's first use (building its encoder for the type by
// reflection) cost that process more than the rest of its call's own
// work. The host decodes it with encoding/json as before; what is
// written is what encoding/json would decode to the same Request.

// appendJSON appends r's JSON to b; false when r has a field only
// encoding/json writes (a host operation, a join).
func (r *Request) appendJSON(b []byte) ([]byte, bool) {
	if r.HostOp != nil || r.Join != nil {
		return b, false
	}
	b = append(b, `{"tool":`...)
	b = appendString(b, r.Tool)
	b = append(b, `,"args":`...)
	b = appendStrings(b, r.Args)
	b = append(b, `,"env":`...)
	b = appendStrings(b, r.Env)
	b = append(b, `,"cwd":`...)
	b = appendString(b, r.Cwd)
	if r.Decide != nil {
		b = append(b, `,"decide":{`...)
		if r.Decide.Terminal {
			b = append(b, `"terminal":true`...)
		}
		b = append(b, '}')
	}
	if r.Secret != "" {
		b = append(b, `,"secret":`...)
		b = appendString(b, r.Secret)
	}
	return append(b, '}'), true
}

// sizeHint is about the length of r's JSON, which a buffer made once
// holds (each growth is a copy and fresh pages).
func (r *Request) sizeHint() int {
	n := 64 + len(r.Tool) + len(r.Cwd) + len(r.Secret)
	for _, s := range r.Args {
		n += len(s) + 3
	}
	for _, s := range r.Env {
		n += len(s) + 3
	}
	return n + n/16
}

// appendStrings appends ss as a JSON array (null when nil).
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: quotes, backslashes and
// control characters escaped, each byte that is not valid UTF-8 written
// as U+FFFD, as encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
