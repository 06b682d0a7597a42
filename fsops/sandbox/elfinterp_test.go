package sandbox

import (
	"debug/elf"
	"os"
	"path/filepath"
	"testing"
)

// debugELFInterp is what programFiles read through debug/elf before
// elfInterp: the reference.
func debugELFInterp(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			buf := make([]byte, p.Filesz)
			if _, err := p.ReadAt(buf, 0); err != nil {
				return ""
			}
			for len(buf) > 0 && buf[len(buf)-1] == 0 {
				buf = buf[:len(buf)-1]
			}
			return string(buf)
		}
	}
	return ""
}

// TestELFInterpMatchesDebugELF holds elfInterp to debug/elf on the
// programs installed here (dynamic and static ones), on the test binary
// and on files that are not ELF or are cut short (which must not make it
// fail or read past what is there).
func TestELFInterpMatchesDebugELF(t *testing.T) {
	var files []string
	for _, dir := range []string{"/bin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/go/bin"} {
		m, _ := filepath.Glob(filepath.Join(dir, "*"))
		files = append(files, m...)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, self)
	tmp := t.TempDir()
	whole, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{0, 3, 4, 51, 52, 63, 64, 100, 1000} {
		p := filepath.Join(tmp, "cut"+string(rune('a'+i)))
		if err := os.WriteFile(p, whole[:min(n, len(whole))], 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	text := filepath.Join(tmp, "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	files = append(files, text)
	dynamic := 0
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || !st.Mode().IsRegular() {
			continue
		}
		got, want := elfInterp(f), debugELFInterp(f)
		if filepath.Dir(f) == tmp && got == elfInterp("/bin/sh") {
			// A cut file whose interpreter is still whole: debug/elf
			// refuses the file for its missing section headers, which
			// elfInterp does not read.
			continue
		}
		if got != want {
			t.Errorf("%s: elfInterp %q, debug/elf %q", f, got, want)
		}
		if want != "" {
			dynamic++
		}
	}
	if dynamic == 0 {
		t.Fatalf("no dynamic program among %d files: the comparison proved nothing", len(files))
	}
	if got := elfInterp("/bin/sh"); got == "" {
		t.Errorf("/bin/sh: no interpreter found")
	}
}
