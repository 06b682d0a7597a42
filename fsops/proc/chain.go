package proc

import (
	"io"
	"os"
	"path"
	"strings"
)

// What a start goes through before a program runs: the links on the way
// to its file, then, for a script, the interpreter its #! line names (and
// that one's links and interpreter), for a dynamic ELF file its loader.
// A sandbox that shows the program but not these fails the start with
// ENOENT and nothing else; ProgramChain finds them beforehand, by reading
// links and the first bytes of files, never by running anything.

// HopKind says what a hop of a chain is.
type HopKind int

const (
	HopFile HopKind = iota // a file the start opens: the program, an interpreter, a loader
	HopLink                // a symbolic link on the way to one
)

// A Hop is one path the start of a program goes through.
type Hop struct {
	Path    string // in the program's world (the sandbox's paths)
	Here    string // where this process read it (the View's answer)
	Kind    HopKind
	Why     string // how the start comes to it; "" for the program itself
	Top     bool   // a hop of the program itself, before any interpreter
	Missing bool   // nothing at Here: the walk ended at it
}

// A Chain is every hop of a program's start, in order.
type Chain struct {
	Hops []Hop
	// Shim is the tree of a shim the program is (pyenv, rbenv, asdf,
	// mise: a directory named shims in a tool's tree), which chooses
	// what it runs only when it runs: the whole tree is needed, and no
	// chain says what of it.
	Shim string
	// EnvName is the program the #! line of EnvOf runs by PATH (`env
	// NAME`) when the lookup found none.
	EnvName, EnvOf string
	// Stop says why the walk ended before a file it could start: a loop
	// of links, too many interpreters, a relative interpreter.
	Stop string
}

// A View maps a path of the program's world to the path this process
// reads it at (a sandbox plan's host path; the path itself inside the
// sandbox).
type View func(p string) string

// The kernel's bounds: links followed in one lookup (MAXSYMLINKS),
// interpreters stacked (binfmt's recursion), the bytes of a file it reads
// to choose its format (BINPRM_BUF_SIZE).
const (
	maxLinks        = 40
	maxInterpreters = 5
	headSize        = 256
)

// ProgramChain walks the start of prog, an absolute path of the program's
// world: links by view, #! lines and ELF loaders, `env NAME` by lookPath
// (a world path, "" for none).
func ProgramChain(prog string, view View, lookPath func(name string) string) Chain {
	w := &chainWalk{view: view, lookPath: lookPath, top: true}
	p, why := path.Clean(prog), ""
	for depth := 0; depth < maxInterpreters; depth++ {
		file, ok := w.resolve(p, why)
		if !ok {
			return w.c
		}
		if w.top {
			w.c.Shim = shimTree(w.c.Hops)
			w.top = false
		}
		if p, why, ok = w.interpreter(file); !ok {
			return w.c
		}
	}
	w.c.Stop = "more than 5 interpreters"
	return w.c
}

type chainWalk struct {
	view     View
	lookPath func(string) string
	c        Chain
	links    int
	top      bool
}

func (w *chainWalk) add(h Hop) {
	h.Top = w.top
	w.c.Hops = append(w.c.Hops, h)
}

// resolve follows p to a file as the kernel would, link by link, each
// link and the file a hop; false when the walk ended (a missing path, a
// loop).
func (w *chainWalk) resolve(p, why string) (string, bool) {
	if !path.IsAbs(p) {
		w.c.Stop = "the relative path " + p
		return "", false
	}
	rest := strings.Split(p[1:], "/")
	cur := "/"
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		here := w.view(next)
		st, err := os.Lstat(here)
		if err != nil || (len(rest) > 0 && st.Mode()&os.ModeSymlink == 0 && !st.IsDir()) {
			full := path.Join(append([]string{next}, rest...)...)
			w.add(Hop{Path: full, Here: w.view(full), Kind: HopFile, Why: why, Missing: true})
			return "", false
		}
		if st.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		target, err := os.Readlink(here)
		if w.links++; err != nil || w.links > maxLinks {
			w.c.Stop = "more than 40 links at " + next
			return "", false
		}
		w.add(Hop{Path: next, Here: here, Kind: HopLink, Why: why})
		why = "where the link " + next + " leads"
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	w.add(Hop{Path: cur, Here: w.view(cur), Kind: HopFile, Why: why})
	return cur, true
}

// interpreter is what the start of file runs next: the interpreter its
// #! line names (through `env NAME`, the NAME lookPath finds), or its ELF
// loader; false when there is none, or the walk ended.
func (w *chainWalk) interpreter(file string) (string, string, bool) {
	f, err := os.Open(w.view(file))
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", "", false
	}
	head := make([]byte, headSize)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if loader, err := ELFInterp(f); err == nil {
		return loader, "the ELF interpreter of " + file, loader != ""
	}
	interp, arg, ok := ParseShebang(head)
	if !ok {
		return "", "", false
	}
	if !path.IsAbs(interp) {
		w.c.Stop = "the relative interpreter " + interp + " on the #! line of " + file
		return "", "", false
	}
	why := "the interpreter on the #! line of " + file
	name := ""
	if path.Base(interp) == "env" {
		name = EnvProgram(arg)
	}
	if name == "" {
		return interp, why, true
	}
	if _, ok := w.resolve(interp, why); !ok {
		return "", "", false
	}
	found := name
	if !strings.Contains(name, "/") {
		found = w.lookPath(name)
	}
	if found == "" {
		w.c.EnvName, w.c.EnvOf = name, file
		return "", "", false
	}
	return found, name + ", which the #! line of " + file + " runs by PATH", true
}

// shimTree is the tree of the first hop of the program in a directory
// named shims: that directory's parent.
func shimTree(hops []Hop) string {
	for _, h := range hops {
		if dir := path.Dir(h.Path); path.Base(dir) == "shims" && h.Top {
			return path.Dir(dir)
		}
	}
	return ""
}

// ParseShebang reads a #! line as the kernel does (fs/binfmt_script.c):
// the interpreter is the first word after #!, the argument the rest of
// the line, one word with its inner blanks, trailing blanks cut. ok is
// false when head does not start with #! or names no interpreter.
func ParseShebang(head []byte) (interp, arg string, ok bool) {
	s, found := strings.CutPrefix(string(head), "#!")
	if !found {
		return "", "", false
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(strings.TrimLeft(s, " \t"), " \t")
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		interp, arg = s[:i], strings.TrimLeft(s[i:], " \t")
	} else {
		interp = s
	}
	return interp, arg, interp != "" && !strings.ContainsRune(interp, 0)
}

// EnvProgram is the program `env ARG` runs, ARG a #! line's argument:
// its first word that is not an option (with -u and -C's values), an
// assignment, or, after -S, the first word of the split rest; "" when
// there is none.
func EnvProgram(arg string) string {
	words := strings.Fields(arg)
	for i := 0; i < len(words); i++ {
		word := words[i]
		switch {
		case word == "--":
			if i+1 < len(words) {
				return words[i+1]
			}
			return ""
		case word == "-u" || word == "-C" || word == "--unset" || word == "--chdir":
			i++
		case strings.HasPrefix(word, "-S") && len(word) > 2:
			return word[2:]
		case strings.HasPrefix(word, "-"), strings.Contains(word, "="):
		default:
			return word
		}
	}
	return ""
}

// InstallDir is the directory to show so that p is shown with what is
// installed around it: the tree above a bin or sbin directory (a node
// version, a venv, a python), else p's own directory; never a directory
// too broad to show whole (TooBroad).
func InstallDir(p, home string) string {
	dir := path.Dir(p)
	if b := path.Base(dir); b == "bin" || b == "sbin" {
		if up := path.Dir(dir); !TooBroad(up, home) {
			return up
		}
	}
	return dir
}

// broadDirs hold many installs, or a person's files, beside the one a
// program needs: they are never shown whole for a program's sake.
var broadDirs = map[string]bool{"/": true, "/usr": true, "/usr/local": true, "/opt": true, "/var": true,
	"/srv": true, "/home": true, "/root": true, "/tmp": true, "/nix": true, "/nix/store": true, "/snap": true}

// TooBroad reports whether dir is too broad to show for a program's
// sake: a system prefix, a home (home, a directory above it, any
// /home/NAME) or its ~/.local, which holds keyrings and the like beside
// ~/.local/bin.
func TooBroad(dir, home string) bool {
	dir = path.Clean(dir)
	if broadDirs[dir] || path.Base(dir) == ".local" || path.Dir(dir) == "/home" {
		return true
	}
	home = path.Clean(home)
	return home != "." && (dir == home || strings.HasPrefix(home, strings.TrimSuffix(dir, "/")+"/"))
}
