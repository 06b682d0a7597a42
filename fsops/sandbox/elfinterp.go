package sandbox

import (
	"os"

	"ctx/fsops/proc"
)

// elfInterp returns the program interpreter an ELF file names (its
// PT_INTERP segment, the dynamic loader), or "" for a static program, a
// file that is not ELF or one that cannot be read (proc.ELFInterp reads
// the two headers it needs by hand: debug/elf would bring compress/flate,
// debug/dwarf and zstd into the binary, and their package initialisation
// into every applet's cold start, for this one field).
func elfInterp(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	interp, err := proc.ELFInterp(f)
	if err != nil {
		return ""
	}
	return interp
}
