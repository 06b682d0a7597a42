package applets

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/manual"
)

// lookupCommand returns the row of `ctx name`.
func lookupCommand(name string) (cli.Applet, bool) {
	i := sort.Search(len(ctxCommands), func(i int) bool { return ctxCommands[i].Name >= name })
	if i < len(ctxCommands) && ctxCommands[i].Name == name {
		return ctxCommands[i], true
	}
	return cli.Applet{}, false
}

// runCtx is the ctx applet: `ctx APPLET ARGS`, `ctx CMD ARGS`, --list,
// --install and --version.
func runCtx(e *cli.Env, args []string) int {
	if len(args) == 0 {
		return cli.UsageError(e, "missing command or applet")
	}
	switch args[0] {
	case "--list", "--install", "--version", "-V":
		// ctx --install --help is about --install, not an argument to it.
		if len(args) == 2 && isHelpFlag(args[1]) {
			opt := args[0]
			if opt == "-V" {
				opt = "--version"
			}
			text, _ := manual.VerbHelp("ctx", "ctx", opt)
			io.WriteString(e.Stdout, text)
			return cli.OK
		}
	}
	switch args[0] {
	case "--list":
		for _, n := range Names() {
			fmt.Fprintln(e.Stdout, n)
		}
		return cli.OK
	case "--install":
		return installLinks(e, args[1:])
	case "--version", "-V":
		if len(args) > 1 {
			e.Name = "ctx --version"
			return cli.UsageError(e, "unexpected argument %q", args[1])
		}
		printVersion(e)
		return cli.OK
	}
	if a, ok := lookup(args[0]); ok && !a.Hidden && a.Name != "ctx" {
		return dispatch(e, a.Name, args[1:])
	}
	c, ok := lookupCommand(args[0])
	if !ok {
		cli.Errorf(e.Stderr, "ctx", "unknown command or applet: %s (try: ctx --list, ctx man ctx)", args[0])
		return cli.NotFound
	}
	e.Name = "ctx " + c.Name
	return runRow(e, c, args[1:])
}

// shadowsHost reports whether applet name is also the name of a common host
// program (the interactive tools run the host's bash, tmux and zellij). A
// link of that name early on PATH would run ctx's tool, with its cleared
// environment, in place of the program: every `#!/usr/bin/env bash` script
// would. --install links them only when asked for by name.
func shadowsHost(name string) bool {
	return name == toolrun.BashTool.Name || name == toolrun.TmuxTool.Name || name == toolrun.ZellijTool.Name
}

// installLinks implements `ctx --install DIR [--hardlink] [APPLET...]`: one
// link per applet named, or per visible applet except those that shadow a
// host program, pointing at this executable. Links that already point at
// it are left alone; anything else already there is reported and kept.
func installLinks(e *cli.Env, args []string) int {
	e.Name = "ctx --install"
	hard := false
	var dir string
	var names []string
	for _, a := range args {
		switch {
		case a == "--hardlink":
			hard = true
		case a == "" || a[0] == '-':
			return cli.UsageError(e, "unexpected argument %q", a)
		case dir == "":
			dir = a
		default:
			if ap, ok := lookup(a); !ok || ap.Hidden {
				return cli.UsageError(e, "%s is not an applet (ctx --list prints them)", a)
			}
			names = append(names, a)
		}
	}
	if dir == "" {
		return cli.UsageError(e, "missing DIR")
	}
	var skipped []string
	if names == nil {
		for _, n := range Names() {
			if shadowsHost(n) {
				skipped = append(skipped, n)
				continue
			}
			names = append(names, n)
		}
	}
	self, err := fsops.Executable()
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "cannot find own executable: %v", err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return cli.Fail(e, cli.Internal, "cannot resolve own executable: %v", err)
	}
	selfInfo, err := os.Stat(self)
	if err != nil {
		return cli.Fail(e, cli.Internal, "%v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cli.FailErr(e, cli.Failure, err)
	}
	if !fsops.Writable(dir) {
		// One line, not one permission error per applet.
		return cli.Fail(e, cli.Denied, "%s is not writable by uid %d: nothing linked; install as root, or into a directory of yours: ctx --install ~/bin", dir, os.Geteuid())
	}
	if skipped != nil {
		cli.Errorf(e.Stderr, e.Name, "not linked: %s (they would shadow the host's programs of those names; name them to link them)", strings.Join(skipped, " "))
	}
	return linkApplets(e, dir, names, self, selfInfo, hard)
}

// linkApplets makes one link per name in dir to self (installLinks).
func linkApplets(e *cli.Env, dir string, names []string, self string, selfInfo os.FileInfo, hard bool) int {
	code := cli.OK
	for _, name := range names {
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
			code = cli.Fail(e, cli.Failure, "%s exists and is not a link to %s; left unchanged", link, self)
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			code = cli.FailErr(e, cli.Failure, err)
			continue
		}
		link2 := os.Symlink
		if hard {
			link2 = os.Link
		}
		if err := link2(self, link); err != nil {
			code = cli.FailErr(e, cli.Failure, err)
		}
	}
	return code
}
