package sandbox

import (
	"encoding/binary"
	"os"
)

// elfInterp returns the program interpreter an ELF file names (its
// PT_INTERP segment, the dynamic loader), or "" for a static program, a
// file that is not ELF or one that cannot be read. It reads the two
// headers it needs by hand: debug/elf would bring compress/flate,
// debug/dwarf and zstd into the binary, and their package initialisation
// into every applet's cold start, for this one field.
func elfInterp(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var h [64]byte
	if n, _ := f.ReadAt(h[:], 0); n < 52 || string(h[:4]) != "\x7fELF" {
		return ""
	}
	var bo binary.ByteOrder
	switch h[5] {
	case 1:
		bo = binary.LittleEndian
	case 2:
		bo = binary.BigEndian
	default:
		return ""
	}
	// Where the program headers are and how large each is; the fields
	// below are those of the 32- and 64-bit layouts (elf(5)).
	var phoff uint64
	var phentsize, phnum, min int
	switch h[4] {
	case 1:
		phoff, phentsize, phnum, min = uint64(bo.Uint32(h[28:])), int(bo.Uint16(h[42:])), int(bo.Uint16(h[44:])), 20
	case 2:
		phoff, phentsize, phnum, min = bo.Uint64(h[32:]), int(bo.Uint16(h[54:])), int(bo.Uint16(h[56:])), 40
	default:
		return ""
	}
	if phentsize < min || phnum == 0 || phoff > 1<<40 {
		return ""
	}
	ph := make([]byte, phentsize*phnum)
	if _, err := f.ReadAt(ph, int64(phoff)); err != nil {
		return ""
	}
	for i := 0; i < phnum; i++ {
		p := ph[i*phentsize:]
		if bo.Uint32(p) != 3 { // PT_INTERP
			continue
		}
		var off, size uint64
		if h[4] == 1 {
			off, size = uint64(bo.Uint32(p[4:])), uint64(bo.Uint32(p[16:]))
		} else {
			off, size = bo.Uint64(p[8:]), bo.Uint64(p[32:])
		}
		if size > 4096 || off > 1<<40 {
			return ""
		}
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, int64(off)); err != nil {
			return ""
		}
		for len(buf) > 0 && buf[len(buf)-1] == 0 {
			buf = buf[:len(buf)-1]
		}
		return string(buf)
	}
	return ""
}
