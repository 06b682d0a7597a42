package proc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// errNotELF is ELFInterp's answer for a file that is no ELF file.
var errNotELF = errors.New("not an ELF file")

// ELF's fields that ELFInterp reads: the program headers and, among
// them, the loader's (PT_INTERP).
const (
	elfHeader64  = 64
	elfPTInterp  = 3
	elfMaxPhnum  = 1024 // the kernel reads at most 64 KiB of program headers
	elfMaxInterp = 4096 // PATH_MAX
)

// ELFInterp is the loader an ELF file names (its PT_INTERP: the dynamic
// linker the kernel starts it with), "" for a static one; errNotELF for
// a file that is not ELF, another error for one it cannot read. Only the
// header and the program headers are read.
func ELFInterp(r io.ReaderAt) (string, error) {
	hdr := make([]byte, elfHeader64)
	if n, _ := r.ReadAt(hdr, 0); n < 52 || !bytes.HasPrefix(hdr, []byte("\x7fELF")) {
		return "", errNotELF
	}
	var order binary.ByteOrder
	switch hdr[5] {
	case 1:
		order = binary.LittleEndian
	case 2:
		order = binary.BigEndian
	default:
		return "", errNotELF
	}
	var phoff uint64
	var phentsize, phnum uint16
	is64 := hdr[4] == 2
	switch {
	case is64:
		phoff, phentsize, phnum = order.Uint64(hdr[32:]), order.Uint16(hdr[54:]), order.Uint16(hdr[56:])
	case hdr[4] == 1:
		phoff, phentsize, phnum = uint64(order.Uint32(hdr[28:])), order.Uint16(hdr[42:]), order.Uint16(hdr[44:])
	default:
		return "", errNotELF
	}
	if phnum > elfMaxPhnum || (is64 && phentsize < 56) || (!is64 && phentsize < 32) {
		return "", errors.New("ELF program headers out of bounds")
	}
	ph := make([]byte, phentsize)
	for i := uint64(0); i < uint64(phnum); i++ {
		if _, err := r.ReadAt(ph, int64(phoff+i*uint64(phentsize))); err != nil {
			return "", err
		}
		if order.Uint32(ph) != elfPTInterp {
			continue
		}
		var off, size uint64
		if is64 {
			off, size = order.Uint64(ph[8:]), order.Uint64(ph[32:])
		} else {
			off, size = uint64(order.Uint32(ph[4:])), uint64(order.Uint32(ph[16:]))
		}
		if size == 0 || size > elfMaxInterp || off > 1<<62 {
			return "", errors.New("ELF interpreter out of bounds")
		}
		b := make([]byte, size)
		if _, err := r.ReadAt(b, int64(off)); err != nil {
			return "", err
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}
