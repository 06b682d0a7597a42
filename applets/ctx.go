package applets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"ctx/ptyterm"
)

// subcommand is one `ctx CMD` command. Each lives in its own file
// (ctx_CMD.go) and is documented by manual/ctx-CMD.md.
type subcommand struct {
	Name string
	Run  func(e *Env, args []string) int
}

var ctxCommands []subcommand

func lookupCommand(name string) (subcommand, bool) {
	i := sort.Search(len(ctxCommands), func(i int) bool { return ctxCommands[i].Name >= name })
	if i < len(ctxCommands) && ctxCommands[i].Name == name {
		return ctxCommands[i], true
	}
	return subcommand{}, false
}

// CommandNames returns the ctx subcommand names in order.
func CommandNames() []string {
	names := make([]string, len(ctxCommands))
	for i, c := range ctxCommands {
		names[i] = c.Name
	}
	return names
}

// runCtx is the ctx applet: `ctx APPLET ARGS`, `ctx CMD ARGS`, --list and
// --install.
func runCtx(e *Env, args []string) int {
	if len(args) == 0 {
		return usageError(e, "missing command or applet")
	}
	switch args[0] {
	case "--list":
		for _, n := range Names() {
			fmt.Fprintln(e.Stdout, n)
		}
		return exitOK
	case "--install":
		return installLinks(e, args[1:])
	}
	if a, ok := lookup(args[0]); ok && !a.Hidden && a.Name != "ctx" {
		return dispatch(e, a.Name, args[1:])
	}
	c, ok := lookupCommand(args[0])
	if !ok {
		fmt.Fprintf(e.Stderr, "ctx: unknown command or applet: %s (try: ctx --list, ctx man ctx)\n", ptyterm.Escape(args[0]))
		return exitNotFound
	}
	e.Name = "ctx " + c.Name
	if len(args) == 2 && (args[1] == "--help" || args[1] == "-h") {
		return printHelp(e, "ctx-"+c.Name)
	}
	return c.Run(e, args[1:])
}

// installLinks implements `ctx --install DIR [--hardlink]`: one link per
// visible applet, pointing at this executable. Links that already point at
// it are left alone; anything else already there is reported and kept.
func installLinks(e *Env, args []string) int {
	e.Name = "ctx --install"
	hard := false
	var dir string
	for _, a := range args {
		switch {
		case a == "--hardlink":
			hard = true
		case dir == "" && a != "" && a[0] != '-':
			dir = a
		default:
			return usageError(e, "unexpected argument %q", a)
		}
	}
	if dir == "" {
		return usageError(e, "missing DIR")
	}
	self, err := os.Executable()
	if err != nil {
		return fail(e, exitInternal, "cannot find own executable: %v", err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return fail(e, exitInternal, "cannot resolve own executable: %v", err)
	}
	selfInfo, err := os.Stat(self)
	if err != nil {
		return fail(e, exitInternal, "%v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(e, exitFailure, "%v", err)
	}
	code := exitOK
	for _, name := range Names() {
		link := filepath.Join(dir, name)
		if st, err := os.Lstat(link); err == nil {
			if os.SameFile(st, selfInfo) {
				continue // the binary itself, or a hard link to it
			}
			if !hard && st.Mode()&os.ModeSymlink != 0 {
				if target, _ := os.Readlink(link); target == self {
					continue
				}
			}
			fmt.Fprintf(e.Stderr, "%s: %s exists and is not a link to %s; left unchanged\n", e.Name, link, self)
			code = exitFailure
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(e.Stderr, "%s: %v\n", e.Name, err)
			code = exitFailure
			continue
		}
		if hard {
			err = os.Link(self, link)
		} else {
			err = os.Symlink(self, link)
		}
		if err != nil {
			fmt.Fprintf(e.Stderr, "%s: %v\n", e.Name, err)
			code = exitFailure
		}
	}
	return code
}
