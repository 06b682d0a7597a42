package ptyterm

import "unicode/utf8"

// scrollback keeps the most recent PTY output so that a client joining late
// first sees the recent screen. It is a byte ring: output is kept raw, so
// the oldest kept byte may fall inside an escape sequence or a line; a
// terminal recovers from that at the next sequence, and a full-screen
// program redraws on the next resize.
type scrollback struct {
	buf   []byte
	start int // index of the oldest byte when full
	full  bool
}

func newScrollback(size int) *scrollback { return &scrollback{buf: make([]byte, 0, size)} }

func (s *scrollback) Write(p []byte) {
	size := cap(s.buf)
	if size == 0 {
		return
	}
	if len(p) >= size {
		s.buf = append(s.buf[:0], p[len(p)-size:]...)
		s.start, s.full = 0, true
		return
	}
	if !s.full {
		room := size - len(s.buf)
		if len(p) <= room {
			s.buf = append(s.buf, p...)
			return
		}
		s.buf = append(s.buf, p[:room]...)
		p = p[room:]
		s.full = true
	}
	for len(p) > 0 {
		n := copy(s.buf[s.start:], p)
		p = p[n:]
		s.start = (s.start + n) % size
	}
}

// Snapshot returns a copy of the kept output, oldest first. Once the ring
// has wrapped, leading UTF-8 continuation bytes are skipped so the copy
// does not begin with half a character.
func (s *scrollback) Snapshot() []byte {
	out := make([]byte, 0, len(s.buf))
	out = append(out, s.buf[s.start:]...)
	out = append(out, s.buf[:s.start]...)
	if s.full {
		for i := 0; i < utf8.UTFMax-1 && len(out) > 0 && !utf8.RuneStart(out[0]); i++ {
			out = out[1:]
		}
	}
	return out
}
