package proc

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chainTree lays out, under a scratch directory, what version managers
// lay out: nvm's npm (a link into lib, #! by env), a pyenv shim, a pipx
// tool (a link into its venv, #! naming the venv's python, a link into a
// pyenv version), a link loop and a script whose interpreter is missing.
func chainTree(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(d, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(body, "@D@", d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, rel string) {
		if err := os.Symlink(strings.ReplaceAll(target, "@D@", d), filepath.Join(d, rel)); err != nil {
			t.Fatal(err)
		}
	}
	write("usr/bin/env", "#!/bin/true\n")
	write("usr/bin/sh", "\x7fELF static enough")
	write("nvm/v22/bin/node", "#!@D@/usr/bin/sh\n")
	write("nvm/v22/lib/node_modules/npm/bin/npm-cli.js", "#!@D@/usr/bin/env node\nrequire('x')\n")
	link("../lib/node_modules/npm/bin/npm-cli.js", "nvm/v22/bin/npm")
	link("versions/v22", "nvm/current")
	write("nvm/versions/v22/bin/node", "#!@D@/usr/bin/sh\n")
	write("pyenv/shims/python", "#!@D@/usr/bin/sh\nexec @D@/pyenv/libexec/pyenv exec python\n")
	write("pyenv/versions/3.12/bin/python3.12", "\x7fELF")
	write("local/share/pipx/venvs/black/bin/black", "#!@D@/local/share/pipx/venvs/black/bin/python\nimport black\n")
	link("@D@/pyenv/versions/3.12/bin/python3.12", "local/share/pipx/venvs/black/bin/python")
	os.MkdirAll(filepath.Join(d, "local/bin"), 0o755)
	link("@D@/local/share/pipx/venvs/black/bin/black", "local/bin/black")
	link("loop2", "local/bin/loop1")
	link("loop1", "local/bin/loop2")
	write("broken", "#!@D@/nowhere/python3 -u\n")
	write("relative", "#!python3\n")
	return d
}

func identity(p string) string { return p }

// hopPaths are the chain's hops, the scratch directory cut off, a link
// marked by a trailing @ and a missing path by a trailing !.
func hopPaths(d string, c Chain) string {
	var out []string
	for _, h := range c.Hops {
		s := strings.TrimPrefix(h.Path, d)
		if h.Kind == HopLink {
			s += "@"
		}
		if h.Missing {
			s += "!"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestProgramChain(t *testing.T) {
	d := chainTree(t)
	look := func(name string) string {
		if name == "node" {
			return d + "/nvm/v22/bin/node"
		}
		return ""
	}
	for _, tc := range []struct{ prog, hops, shim, env, stop string }{
		{prog: "/nvm/v22/bin/npm", hops: "/nvm/v22/bin/npm@ /nvm/v22/lib/node_modules/npm/bin/npm-cli.js /usr/bin/env /nvm/v22/bin/node /usr/bin/sh"},
		{prog: "/nvm/current/bin/node", hops: "/nvm/current@ /nvm/versions/v22/bin/node /usr/bin/sh"},
		{prog: "/pyenv/shims/python", hops: "/pyenv/shims/python /usr/bin/sh", shim: "/pyenv"},
		{prog: "/local/bin/black", hops: "/local/bin/black@ /local/share/pipx/venvs/black/bin/black /local/share/pipx/venvs/black/bin/python@ /pyenv/versions/3.12/bin/python3.12"},
		{prog: "/local/bin/loop1", hops: strings.Repeat("/local/bin/loop1@ /local/bin/loop2@ ", 20)[:len(strings.Repeat("/local/bin/loop1@ /local/bin/loop2@ ", 20))-1], stop: "more than 40 links at " + d + "/local/bin/loop1"},
		{prog: "/broken", hops: "/broken /nowhere/python3!"},
		{prog: "/relative", hops: "/relative", stop: "the relative interpreter python3 on the #! line of " + d + "/relative"},
		{prog: "/nvm/v22/bin/nothing", hops: "/nvm/v22/bin/nothing!"},
		{prog: "/nvm/v22/bin/node/x", hops: "/nvm/v22/bin/node/x!"},
	} {
		c := ProgramChain(d+tc.prog, identity, look)
		if got := hopPaths(d, c); got != tc.hops {
			t.Errorf("%s: hops\n %s\nwant\n %s", tc.prog, got, tc.hops)
		}
		if got := strings.TrimPrefix(c.Shim, d); got != tc.shim {
			t.Errorf("%s: shim %q, want %q", tc.prog, got, tc.shim)
		}
		if c.EnvName != tc.env || c.Stop != tc.stop {
			t.Errorf("%s: env %q stop %q, want %q %q", tc.prog, c.EnvName, c.Stop, tc.env, tc.stop)
		}
	}
	// env NAME that no lookup finds: named, with the script
	c := ProgramChain(d+"/nvm/v22/bin/npm", identity, func(string) string { return "" })
	if c.EnvName != "node" || c.EnvOf != d+"/nvm/v22/lib/node_modules/npm/bin/npm-cli.js" {
		t.Errorf("env lookup that fails: %q of %q", c.EnvName, c.EnvOf)
	}
	// the hops' why, as a refusal names them
	c = ProgramChain(d+"/local/bin/black", identity, look)
	want := []string{"", "where the link " + d + "/local/bin/black leads",
		"the interpreter on the #! line of " + d + "/local/share/pipx/venvs/black/bin/black",
		"where the link " + d + "/local/share/pipx/venvs/black/bin/python leads"}
	for i, h := range c.Hops {
		if h.Why != want[i] || h.Top != (i < 2) {
			t.Errorf("hop %d: why %q top %v, want %q %v", i, h.Why, h.Top, want[i], i < 2)
		}
	}
}

// A view maps the world's paths to where they are read: the walk reads
// through it and reports the world's paths.
func TestProgramChainView(t *testing.T) {
	d := chainTree(t)
	view := func(p string) string {
		if rest, ok := strings.CutPrefix(p, "/sandbox"); ok {
			return d + rest
		}
		return p
	}
	c := ProgramChain("/sandbox/local/bin/black", view, func(string) string { return "" })
	if len(c.Hops) < 2 || c.Hops[0].Path != "/sandbox/local/bin/black" || c.Hops[0].Here != d+"/local/bin/black" ||
		c.Hops[1].Path != d+"/local/share/pipx/venvs/black/bin/black" {
		t.Errorf("through a view: %+v", c.Hops)
	}
}

func TestParseShebang(t *testing.T) {
	for _, tc := range []struct{ head, interp, arg string }{
		{"#!/bin/sh\necho", "/bin/sh", ""},
		{"#! /usr/bin/env  node --x  \n", "/usr/bin/env", "node --x"},
		{"#!/usr/bin/python3\t-u\n", "/usr/bin/python3", "-u"},
		{"#!/bin/sh", "/bin/sh", ""},
		{"#!\n", "", ""},
		{"\x7fELF", "", ""},
	} {
		interp, arg, ok := ParseShebang([]byte(tc.head))
		if interp != tc.interp || arg != tc.arg || ok != (tc.interp != "") {
			t.Errorf("%q: %q %q %v", tc.head, interp, arg, ok)
		}
	}
}

func TestEnvProgram(t *testing.T) {
	for arg, want := range map[string]string{
		"node": "node", "-S node --x": "node", "-Snode": "node", "-i PATH=/x python3": "python3",
		"-u HOME bash": "bash", "-- -weird": "-weird", "-i": "", "": "",
	} {
		if got := EnvProgram(arg); got != want {
			t.Errorf("env %q runs %q, want %q", arg, got, want)
		}
	}
}

func TestInstallDir(t *testing.T) {
	home := "/home/u"
	for p, want := range map[string]string{
		"/home/u/.nvm/versions/node/v22/bin/node":               "/home/u/.nvm/versions/node/v22",
		"/home/u/.local/bin/black":                              "/home/u/.local/bin",
		"/home/u/bin/tool":                                      "/home/u/bin",
		"/home/other/bin/tool":                                  "/home/other/bin",
		"/usr/local/bin/tool":                                   "/usr/local/bin",
		"/opt/jdk/bin/java":                                     "/opt/jdk",
		"/home/u/.local/share/claude/versions/2.1":              "/home/u/.local/share/claude/versions",
		"/home/u/.nvm/versions/node/v22/lib/npm/bin/npm-cli.js": "/home/u/.nvm/versions/node/v22/lib/npm",
	} {
		if got := InstallDir(p, home); got != want {
			t.Errorf("InstallDir(%s) = %s, want %s", p, got, want)
		}
	}
	for _, d := range []string{"/", "/home", "/home/u", "/home/x", "/home/u/.local", "/usr", "/tmp"} {
		if !TooBroad(d, home) {
			t.Errorf("%s is not too broad", d)
		}
	}
}

// elf64 is a minimal 64-bit ELF header with one program header, of type
// pt, whose contents are interp.
func elf64(order binary.ByteOrder, pt uint32, interp string) []byte {
	b := make([]byte, 64+56)
	copy(b, "\x7fELF")
	b[4], b[5] = 2, 1
	if order == binary.BigEndian {
		b[5] = 2
	}
	order.PutUint64(b[32:], 64)
	order.PutUint16(b[54:], 56)
	order.PutUint16(b[56:], 1)
	order.PutUint32(b[64:], pt)
	order.PutUint64(b[64+8:], uint64(len(b)))
	order.PutUint64(b[64+32:], uint64(len(interp)+1))
	return append(append(b, interp...), 0)
}

func TestELFInterp(t *testing.T) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		got, err := ELFInterp(bytes.NewReader(elf64(order, elfPTInterp, "/lib64/ld-linux-x86-64.so.2")))
		if err != nil || got != "/lib64/ld-linux-x86-64.so.2" {
			t.Errorf("%v: %q %v", order, got, err)
		}
	}
	if got, err := ELFInterp(bytes.NewReader(elf64(binary.LittleEndian, 1, "x"))); got != "" || err != nil {
		t.Errorf("static: %q %v", got, err)
	}
	if _, err := ELFInterp(strings.NewReader("#!/bin/sh\n" + strings.Repeat(" ", 60))); err != errNotELF {
		t.Errorf("a script: %v", err)
	}
	// the host's own shell, where it is a dynamic ELF file: its loader
	// is an absolute path that exists
	if f, err := os.Open("/bin/sh"); err == nil {
		defer f.Close()
		if loader, err := ELFInterp(f); err == nil && loader != "" {
			if _, err := os.Stat(loader); err != nil || !filepath.IsAbs(loader) {
				t.Errorf("/bin/sh's loader %q: %v", loader, err)
			}
		}
	}
}

func FuzzParseShebang(f *testing.F) {
	for _, s := range []string{"#!/bin/sh\n", "#! /usr/bin/env -S node --x\n", "#!\t\n", "\x7fELF", "#!/a\x00b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		interp, arg, ok := ParseShebang(head)
		if ok && (interp == "" || strings.ContainsAny(interp, " \t\n") || strings.Contains(arg, "\n")) {
			t.Fatalf("%q: interp %q arg %q", head, interp, arg)
		}
		if ok {
			EnvProgram(arg)
		}
	})
}

func FuzzELFInterp(f *testing.F) {
	f.Add(elf64(binary.LittleEndian, elfPTInterp, "/lib/ld.so"))
	f.Add(elf64(binary.BigEndian, elfPTInterp, "/lib/ld.so"))
	f.Add([]byte("\x7fELF\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		interp, err := ELFInterp(bytes.NewReader(b))
		if err == nil && len(interp) > elfMaxInterp {
			t.Fatalf("interpreter of %d bytes", len(interp))
		}
	})
}
