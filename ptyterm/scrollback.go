package ptyterm

import "unicode/utf8"

// scrollback keeps the most recent PTY output so that a client joining late
// first sees the recent screen. Output is kept raw, so the oldest kept byte
// may fall inside an escape sequence or a line; a terminal recovers from
// that at the next sequence, and a full-screen program redraws on the next
// resize.
//
// It keeps the output where it lies, holding the slabs (see slab) of the
// chunks it refers to, instead of copying every byte of a stream into a
// ring: output read back to back is adjacent in its slab, so the chunks
// merge and the list stays a few entries long. Only a joining client's
// Snapshot copies.
type scrollback struct {
	size   int
	chunks []chunk // oldest first; each holds its slab
	n      int     // bytes in chunks, at most size
	cut    bool    // older output has been let go of
}

func newScrollback(size int) *scrollback { return &scrollback{size: size} }

// add keeps out, holding its slab, and lets go of what falls out of the
// last size bytes.
func (s *scrollback) add(out chunk) {
	if s.size == 0 || len(out.p) == 0 {
		return
	}
	if extra := len(out.p) - s.size; extra > 0 {
		out.p, out.off, s.cut = out.p[extra:], out.off+extra, true
	}
	s.n += len(out.p)
	merged := false
	if k := len(s.chunks); k > 0 {
		// The kept chunk's hold on the slab covers what joins it.
		s.chunks[k-1], merged = join(s.chunks[k-1], out)
	}
	if !merged {
		out.ref()
		s.chunks = append(s.chunks, out)
	}
	for s.n > s.size {
		first := &s.chunks[0]
		if drop := s.n - s.size; drop < len(first.p) {
			first.p, first.off = first.p[drop:], first.off+drop
			s.n -= drop
		} else {
			s.n -= len(first.p)
			first.unref()
			k := copy(s.chunks, s.chunks[1:])
			s.chunks[k] = chunk{}
			s.chunks = s.chunks[:k]
		}
		s.cut = true
	}
}

// Snapshot returns a copy of the kept output, oldest first. Once older
// output has been let go of, leading UTF-8 continuation bytes are skipped
// so the copy does not begin with half a character.
func (s *scrollback) Snapshot() []byte {
	out := make([]byte, 0, s.n)
	for _, c := range s.chunks {
		out = append(out, c.p...)
	}
	if s.cut {
		for i := 0; i < utf8.UTFMax-1 && len(out) > 0 && !utf8.RuneStart(out[0]); i++ {
			out = out[1:]
		}
	}
	return out
}

// release lets go of everything kept.
func (s *scrollback) release() {
	release(s.chunks)
	s.chunks, s.n = nil, 0
}
