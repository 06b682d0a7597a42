package ptyterm

import (
	"bytes"
	"strconv"
)

// The attach stream is raw bytes, so a client reports its window size in
// band with an operating-system-command string that terminals ignore:
//
//	ESC ] ctxterm;winsize;ROWS;COLS BEL        (ESC \ may end it instead of BEL)
//
// Every sequence that begins with the marker "ESC ] ctxterm;" belongs to
// ctxterm and never reaches the program. A well-formed winsize request
// resizes the PTY; any other body (unknown command, bad numbers, a zero
// size) is dropped. A body longer than maxOSCBody bytes without its
// terminator is dropped and the bytes after it pass as ordinary input, so a
// missing terminator can never swallow the session's input.
//
// Bytes that only begin like the marker (ESC alone, ESC [ A for an arrow
// key, ESC ] 0; for a title) pass through unchanged. Because a read may end
// in the middle of the marker, a proper prefix of it is held until the next
// bytes decide; the server releases a held prefix when no more input comes
// within a short time (a lone Escape key press must not wait for the next
// key).
const (
	oscMarker  = "\x1b]ctxterm;"
	maxOSCBody = 64
)

// Winsize is a terminal window size in character cells.
type Winsize struct {
	Rows, Cols uint16
}

// WinsizeSequence returns the in-band request that sets the PTY to ws.
func WinsizeSequence(ws Winsize) []byte {
	b := append([]byte(oscMarker), "winsize;"...)
	b = strconv.AppendUint(b, uint64(ws.Rows), 10)
	b = append(b, ';')
	b = strconv.AppendUint(b, uint64(ws.Cols), 10)
	return append(b, '\a')
}

type oscState int

const (
	oscNormal oscState = iota
	oscMarkerPrefix
	oscBody
	oscBodyEsc // ESC seen inside a body: "\" completes the terminator
)

// winsizeFilter removes ctxterm's in-band sequences from an attacher's
// input stream. It is a streaming parser: input may be split anywhere.
type winsizeFilter struct {
	state oscState
	held  []byte // marker prefix (oscMarkerPrefix) or body (oscBody*)
}

// Filter appends to dst the bytes of p that are ordinary input and returns
// it, with the window sizes requested by complete sequences, in order.
func (f *winsizeFilter) Filter(dst, p []byte) ([]byte, []Winsize) {
	var sizes []Winsize
	for len(p) > 0 {
		if f.state == oscNormal {
			i := bytes.IndexByte(p, 0x1b)
			if i < 0 {
				return append(dst, p...), sizes
			}
			dst = append(dst, p[:i]...)
			f.state, f.held = oscMarkerPrefix, append(f.held[:0], 0x1b)
			p = p[i+1:]
			continue
		}
		c := p[0]
		p = p[1:]
		switch f.state {
		case oscMarkerPrefix:
			if c == oscMarker[len(f.held)] {
				f.held = append(f.held, c)
				if len(f.held) == len(oscMarker) {
					f.state, f.held = oscBody, f.held[:0]
				}
				continue
			}
			// Not ours: release what was held and look at c afresh
			// (it may be the ESC that starts the real sequence).
			dst = append(dst, f.held...)
			f.state, f.held = oscNormal, f.held[:0]
			p = append([]byte{c}, p...)
		case oscBody:
			switch c {
			case '\a':
				if ws, ok := parseWinsizeBody(f.held); ok {
					sizes = append(sizes, ws)
				}
				f.state, f.held = oscNormal, f.held[:0]
			case 0x1b:
				f.state = oscBodyEsc
			default:
				if len(f.held) == maxOSCBody {
					f.state, f.held = oscNormal, f.held[:0]
					p = append([]byte{c}, p...)
					continue
				}
				f.held = append(f.held, c)
			}
		case oscBodyEsc:
			if c == '\\' {
				if ws, ok := parseWinsizeBody(f.held); ok {
					sizes = append(sizes, ws)
				}
				f.state, f.held = oscNormal, f.held[:0]
				continue
			}
			// A broken terminator: drop the sequence; the ESC and c are
			// input again.
			f.state, f.held = oscNormal, f.held[:0]
			p = append([]byte{0x1b, c}, p...)
		}
	}
	return dst, sizes
}

// HoldsPrefix reports whether the filter holds a proper prefix of the
// marker: bytes that are ordinary input unless the next ones complete it.
func (f *winsizeFilter) HoldsPrefix() bool { return f.state == oscMarkerPrefix }

// Release appends a held marker prefix to dst as ordinary input, for when
// no further input arrived in time. A sequence already inside its body is
// ctxterm's and stays held.
func (f *winsizeFilter) Release(dst []byte) []byte {
	if f.state != oscMarkerPrefix {
		return dst
	}
	dst = append(dst, f.held...)
	f.state, f.held = oscNormal, f.held[:0]
	return dst
}

// parseWinsizeBody parses "winsize;ROWS;COLS": decimal numbers of 1 to 5
// digits, each between 1 and 65535.
func parseWinsizeBody(b []byte) (Winsize, bool) {
	rest, ok := bytes.CutPrefix(b, []byte("winsize;"))
	if !ok {
		return Winsize{}, false
	}
	r, c, ok := bytes.Cut(rest, []byte(";"))
	if !ok {
		return Winsize{}, false
	}
	rows, ok1 := parseCells(r)
	cols, ok2 := parseCells(c)
	return Winsize{rows, cols}, ok1 && ok2
}

func parseCells(b []byte) (uint16, bool) {
	if len(b) == 0 || len(b) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return 0, false
	}
	return uint16(n), true
}
