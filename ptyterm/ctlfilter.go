package ptyterm

import (
	"encoding/binary"
	"io"
	"unicode/utf8"
)

// maxControlString bounds a dropped control string: past it the filter
// goes back to passing output, so a stray "ESC ]" (cat of a binary file)
// hides at most this much. The terminal never saw the string begin, so
// what follows is shown as text, never obeyed.
const maxControlString = 64 << 10

// Filter states.
const (
	fGround    = iota // text, CSI and other escape sequences pass
	fEscape           // an ESC is held: its next byte decides
	fString           // inside a dropped OSC, DCS, SOS, PM or APC string
	fStringEsc        // an ESC inside a dropped string: ST or a new sequence
)

// ControlFilter keeps an agent's terminal strings away from a person's
// terminal, as terminal multiplexers do: every OSC (clipboard writes and
// reads, OSC 52; window and icon titles, OSC 0, 1, 2; colors, hyperlinks,
// notifications), DCS, SOS, PM and APC string is dropped, whether it
// starts 7-bit (ESC ] P X ^ _), as a raw 8-bit C1 byte (0x9D, 0x90, 0x98,
// 0x9E, 0x9F) or as a C1 code point in UTF-8 (U+009D, ...), and ends with
// BEL, ST (ESC \, 0x9C), CAN, SUB or maxControlString bytes. Everything
// else passes byte for byte: text, colors (CSI SGR), cursor movement and
// every other CSI or escape sequence.
//
// It is a streaming state machine: a sequence may be split across any
// number of calls. Its output never lets a terminal start a string: an ESC
// is passed only together with the byte after it, and an incomplete UTF-8
// sequence is held until it completes (one cut short by another byte is
// shown as U+FFFD, as a UTF-8 terminal shows it), so bytes on either side
// of a dropped string can never join into ESC ] or U+009D. Output is taken
// to be UTF-8; a byte that starts no valid UTF-8 sequence is shown as
// U+FFFD, a stray continuation byte passes. The zero value is ready.
type ControlFilter struct {
	state  uint8
	nheld  uint8   // bytes of an incomplete UTF-8 sequence held (fGround)
	held   [4]byte // those bytes
	strLen int     // bytes of the current dropped string
}

var replacement = []byte(string(utf8.RuneError))

// stringC1 reports the C1 controls that start a control string: DCS, SOS,
// OSC, PM, APC.
func stringC1(c rune) bool {
	return c == 0x90 || c == 0x98 || c == 0x9d || c == 0x9e || c == 0x9f
}

// stringIntroducer reports the bytes that follow ESC to start a control
// string: ] (OSC), P (DCS), X (SOS), ^ (PM), _ (APC).
func stringIntroducer(c byte) bool {
	return c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_'
}

// Filter appends the output of p to dst and returns it; when p passes
// whole and dst is empty, it returns p itself (no copy), so the result may
// alias p.
func (f *ControlFilter) Filter(dst, p []byte) []byte {
	if f.state == fGround && f.nheld == 0 {
		n := passRun(p)
		if n == len(p) && len(dst) == 0 {
			return p
		}
		dst, p = append(dst, p[:n]...), p[n:]
	}
	for len(p) > 0 {
		dst = f.step(dst, p[0])
		p = p[1:]
		if f.state == fGround && f.nheld == 0 {
			n := passRun(p)
			dst, p = append(dst, p[:n]...), p[n:]
		}
	}
	return dst
}

// passRun is the length of the prefix of p that passes as it is from the
// ground state: ASCII, ESC with a byte after it that starts no string,
// complete valid UTF-8 runes but the string
// C1 controls, stray continuation bytes but the string C1 bytes. The fast
// path: plain output is scanned once and copied once.
func passRun(p []byte) int {
	i := 0
	for i < len(p) {
		// Eight bytes at a time while they are ASCII without ESC.
		for i+8 <= len(p) {
			w := binary.LittleEndian.Uint64(p[i:])
			x := w ^ 0x1b1b1b1b1b1b1b1b // a zero byte where w has ESC
			if (w|(x-0x0101010101010101)&^x)&0x8080808080808080 != 0 {
				break
			}
			i += 8
		}
		// Then byte by byte over the next eight, which hold one at least.
		for stop := min(i+8, len(p)); i < stop; {
			if c := p[i]; c < utf8.RuneSelf && c != 0x1b {
				i++
				continue
			}
			n := passOne(p[i:])
			if n == 0 {
				return i
			}
			i += n
		}
	}
	return i
}

// passOne is the length of the byte, rune or escape sequence p starts
// with when it passes as it is, 0 when step must decide.
func passOne(p []byte) int {
	c := p[0]
	switch {
	case c == 0x1b:
		// ESC and a plain final or intermediate byte (CSI, charset,
		// keypad...) pass as escape would pass them.
		if len(p) > 1 && p[1] >= 0x20 && p[1] <= 0x7e && !stringIntroducer(p[1]) {
			return 2
		}
		return 0
	case c < utf8.RuneSelf:
		return 1
	case c < 0xc0: // a stray continuation byte
		if stringC1(rune(c)) {
			return 0
		}
		return 1
	}
	if c >= 0xc3 && c < 0xe0 && len(p) > 1 && p[1]&0xc0 == 0x80 {
		return 2 // U+00C0-U+07FF: no control among them
	}
	r, n := utf8.DecodeRune(p)
	if r == utf8.RuneError && n <= 1 || stringC1(r) {
		return 0 // incomplete, invalid or a string start: step decides
	}
	return n
}

// step takes one byte in the slow path.
func (f *ControlFilter) step(dst []byte, c byte) []byte {
	switch f.state {
	case fEscape:
		return f.escape(dst, c)
	case fString:
		switch c {
		case 0x07, 0x18, 0x1a, 0x9c: // BEL, CAN, SUB, ST: the string ends
			f.state = fGround
		case 0x1b:
			f.state = fStringEsc
		default:
			if f.strLen++; f.strLen > maxControlString {
				f.state = fGround
			}
		}
		return dst
	case fStringEsc:
		if c == '\\' {
			f.state = fGround
			return dst
		}
		f.state = fEscape // ESC ends the string and starts a sequence
		return f.escape(dst, c)
	}
	return f.ground(dst, c)
}

// escape takes the byte after a held ESC, as a terminal's parser would.
func (f *ControlFilter) escape(dst []byte, c byte) []byte {
	switch {
	case stringIntroducer(c):
		f.state, f.strLen = fString, 0
	case c == 0x1b: // a new ESC: the held one does nothing
	case c == 0x18 || c == 0x1a: // CAN, SUB cancel the sequence
		f.state = fGround
		dst = append(dst, c)
	case c < 0x20 || c == 0x7f: // executed or ignored; the ESC stays held
		dst = append(dst, c)
	case c < utf8.RuneSelf:
		f.state = fGround
		dst = append(dst, 0x1b, c)
	default: // a C1 or non-ASCII byte cancels the sequence; ESC is dropped
		f.state = fGround
		dst = f.ground(dst, c)
	}
	return dst
}

// ground takes one byte outside any sequence, in the slow path: ESC,
// a byte of non-ASCII UTF-8 (held until its rune is whole), a C1 byte.
func (f *ControlFilter) ground(dst []byte, c byte) []byte {
	switch {
	case c == 0x1b:
		if f.nheld > 0 {
			dst = f.cutShort(dst)
		}
		f.state = fEscape
		return dst
	case f.nheld == 0 && c < utf8.RuneSelf:
		return append(dst, c)
	case f.nheld == 0 && c < 0xc0: // stray continuation byte
		if stringC1(rune(c)) {
			f.state, f.strLen = fString, 0
			return dst
		}
		return append(dst, c)
	case f.nheld > 0 && (c < 0x80 || c >= 0xc0): // not a continuation
		dst = f.cutShort(dst)
		return f.ground(dst, c)
	}
	f.held[f.nheld] = c
	f.nheld++
	h := f.held[:f.nheld]
	if !utf8.FullRune(h) {
		return dst
	}
	r, n := utf8.DecodeRune(h)
	if r == utf8.RuneError && n <= 1 {
		// Invalid: the first byte is shown as U+FFFD, the rest decided
		// again (a continuation byte among them passes as a stray).
		rest := append([]byte(nil), h[1:]...)
		f.nheld = 0
		dst = append(dst, replacement...)
		for _, b := range rest {
			dst = f.step(dst, b)
		}
		return dst
	}
	f.nheld = 0
	if stringC1(r) {
		f.state, f.strLen = fString, 0
		return dst
	}
	return append(dst, h...)
}

// cutShort shows a held incomplete UTF-8 sequence that another byte
// interrupted as one U+FFFD: its bytes never reach the terminal, where
// they could join with what follows a dropped string.
func (f *ControlFilter) cutShort(dst []byte) []byte {
	f.nheld = 0
	return append(dst, replacement...)
}

// filterWriter writes through a ControlFilter.
type filterWriter struct {
	w   io.Writer
	f   ControlFilter
	buf []byte
}

// NewControlFilterWriter returns a writer that passes what is written to
// w through a ControlFilter (see ControlFilter).
func NewControlFilterWriter(w io.Writer) io.Writer { return &filterWriter{w: w} }

func (fw *filterWriter) Write(p []byte) (int, error) {
	out := fw.f.Filter(fw.buf[:0], p)
	if len(out) > 0 {
		if _, err := fw.w.Write(out); err != nil {
			return 0, err
		}
	}
	if len(out) > 0 && (len(p) == 0 || &out[0] != &p[0]) {
		fw.buf = out[:0] // keep the grown buffer, never p
	}
	return len(p), nil
}
