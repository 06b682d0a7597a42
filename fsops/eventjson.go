package fsops

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// appendJSON appends ev as encoding/json's Marshal writes it, byte for
// byte (the fields in order, omitempty, HTML-safe escapes), without
// reflection: a tool call writes one event per process, and Marshal's
// first call on a struct type builds its field cache, in every process.
// ok is false for what Marshal refuses (a DurMS that is
// NaN or infinite).
func (ev *Event) appendJSON(b []byte) (_ []byte, ok bool) {
	if math.IsNaN(ev.DurMS) || math.IsInf(ev.DurMS, 0) {
		return b, false
	}
	b = appendJSONField(b, `{"ts":`, ev.TS)
	b = appendJSONField(b, `,"type":`, ev.Type)
	b = appendJSONField(b, `,"agent":`, ev.Agent)
	b = appendJSONField(b, `,"session":`, ev.Session)
	b = appendJSONField(b, `,"object":`, ev.Object)
	b = appendJSONField(b, `,"status":`, ev.Status)
	for _, f := range [...]struct{ key, v string }{{`,"run":`, ev.Run}, {`,"errno":`, ev.Errno}, {`,"layer":`, ev.Layer}} {
		if f.v != "" {
			b = appendJSONField(b, f.key, f.v)
		}
	}
	if ev.Exit != nil {
		b = strconv.AppendInt(append(b, `,"exit":`...), int64(*ev.Exit), 10)
	}
	if ev.DurMS != 0 {
		b = appendJSONFloat(append(b, `,"dur_ms":`...), ev.DurMS)
	}
	if ev.UID != nil {
		b = strconv.AppendInt(append(b, `,"uid":`...), int64(*ev.UID), 10)
	}
	if ev.PID != 0 {
		b = strconv.AppendInt(append(b, `,"pid":`...), int64(ev.PID), 10)
	}
	if ev.Worker != "" {
		b = appendJSONField(b, `,"worker":`, ev.Worker)
	}
	if ev.Detail != "" {
		b = appendJSONField(b, `,"detail":`, ev.Detail)
	}
	return append(b, '}'), true
}

func appendJSONField(b []byte, key, v string) []byte {
	return AppendJSONString(append(b, key...), v)
}

// appendJSONFloat is encoding/json's float64 encoding: 'f' format between
// 1e-6 and 1e21, else 'e' with a one-digit negative exponent unpadded.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// AppendJSONString is encoding/json's string encoding with HTML escaping
// on, as Marshal does it: the short escapes, \u00XX for other control
// characters and for < > &, \ufffd for invalid UTF-8, and U+2028 and
// U+2029 escaped. Beyond Marshal it escapes the display controls
// (displayControl) as \uXXXX too: an event line stays the same JSON value,
// and a person who reads the file with cat or tail sees no raw C1 control
// or bidi override an agent put in a name or detail.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
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
		if r == '\u2028' || r == '\u2029' || displayControl(r) {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}

// displayControl reports the runes an event never holds raw though JSON
// allows them: the C1 controls U+0080-U+009F (U+009B is a CSI to a
// terminal) and the bidi controls that reorder what a line shows (U+061C,
// U+200E, U+200F, the embeddings and overrides U+202A-U+202E, the
// isolates U+2066-U+2069).
func displayControl(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f, r == 0x061c, r == 0x200e, r == 0x200f,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
