package ptyterm

import (
	"encoding/binary"
	"sync"
)

// The record's pty.output lines carry base64 (standard alphabet, padded),
// and encoding it is most of what recording a fast stream costs. This
// encoder produces exactly encoding/base64.StdEncoding's output with half
// its table lookups: it looks up two characters (12 bits) at a time and
// moves 12 bytes in, 16 characters out, per round.

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// b64Pairs[v] is the two characters of the 12-bit value v, the first in
// the low byte (little-endian order, as stored). It is filled on the first
// encoding, not at package initialisation: every applet's start would
// otherwise compute and touch these 8 KiB.
var (
	b64Pairs     [4096]uint16
	b64PairsOnce sync.Once
)

func fillB64Pairs() {
	for v := range b64Pairs {
		b64Pairs[v] = uint16(b64Alphabet[v>>6]) | uint16(b64Alphabet[v&63])<<8
	}
}

// appendBase64 appends the padded standard base64 encoding of src to dst.
func appendBase64(dst, src []byte) []byte {
	b64PairsOnce.Do(fillB64Pairs)
	n := (len(src) + 2) / 3 * 4
	start := len(dst)
	if cap(dst)-start < n {
		grown := make([]byte, start, start+n+(start+n)/2)
		copy(grown, dst)
		dst = grown
	}
	out := dst[start : start+n]
	// 12 bytes in, 16 characters out; each round reads 8 bytes at a time,
	// so it stops while 14 remain.
	s, o := src, out
	for len(s) >= 14 && len(o) >= 16 {
		v := binary.BigEndian.Uint64(s)
		w := binary.BigEndian.Uint64(s[6:])
		binary.LittleEndian.PutUint64(o, uint64(b64Pairs[v>>52])|uint64(b64Pairs[v>>40&0xfff])<<16|
			uint64(b64Pairs[v>>28&0xfff])<<32|uint64(b64Pairs[v>>16&0xfff])<<48)
		binary.LittleEndian.PutUint64(o[8:], uint64(b64Pairs[w>>52])|uint64(b64Pairs[w>>40&0xfff])<<16|
			uint64(b64Pairs[w>>28&0xfff])<<32|uint64(b64Pairs[w>>16&0xfff])<<48)
		s, o = s[12:], o[16:]
	}
	si, di := len(src)-len(s), len(out)-len(o)
	for ; len(src)-si >= 3; si, di = si+3, di+4 {
		v := uint(src[si])<<16 | uint(src[si+1])<<8 | uint(src[si+2])
		p, q := b64Pairs[v>>12], b64Pairs[v&0xfff]
		out[di], out[di+1], out[di+2], out[di+3] = byte(p), byte(p>>8), byte(q), byte(q>>8)
	}
	switch len(src) - si {
	case 2:
		v := uint(src[si])<<16 | uint(src[si+1])<<8
		out[di], out[di+1], out[di+2], out[di+3] = b64Alphabet[v>>18], b64Alphabet[v>>12&63], b64Alphabet[v>>6&63], '='
	case 1:
		v := uint(src[si]) << 16
		out[di], out[di+1], out[di+2], out[di+3] = b64Alphabet[v>>18], b64Alphabet[v>>12&63], '=', '='
	}
	return dst[:start+n]
}
