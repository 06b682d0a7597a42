// Package applets holds the applet table of the ctx multicall binary and
// its dispatch: which row an argv[0] and its verbs name, --help, --list and
// --install. The rows' code lives in the sub-packages (cli, toolrun,
// runhost, lifecycle, mcp, ctx, tsh, authority); only main calls os.Exit.
package applets

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"ctx/applets/cli"
	"ctx/applets/mcp"
	"ctx/applets/toolrun"
	"ctx/manual"
)

var table []cli.Applet

func init() { cli.SetAppletLookup(lookup) }

// lookup returns the applet called name.
func lookup(name string) (cli.Applet, bool) {
	i := sort.Search(len(table), func(i int) bool { return table[i].Name >= name })
	if i < len(table) && table[i].Name == name {
		return table[i], true
	}
	return cli.Applet{}, false
}

// Main dispatches argv to an applet and returns the exit code.
func Main(argv []string) int {
	e := processEnv()
	e.Exits = true
	return runMain(e, argv)
}

// processEnv is the Env of this process: its standard descriptors and
// environment.
func processEnv() *cli.Env {
	return &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// runMain is Main with the Env to run in.
func runMain(e *cli.Env, argv []string) int {
	if len(argv) == 0 {
		argv = []string{"ctx"}
	}
	e.Argv0 = argv[0]
	// A login shell gets "-name" as argv[0]; busybox strips the dash too.
	name := strings.TrimPrefix(filepath.Base(argv[0]), "-")
	// /mnt/mcp/SERVER/TOOL is named after the MCP tool, not the ctx tool
	// it projects: it runs as that tool, found through CTX_PATH.
	if n, exe, ok := toolrun.MntTool(e, argv[0]); ok {
		e.Argv0 = exe
		a, ok := findApplet(e, n)
		if !ok {
			return toolrun.RunThirdPartyTool(e, n, exe, argv[1:])
		}
		e.Name = a.Name
		return runRow(e, a, argv[1:])
	}
	return dispatch(e, name, argv[1:])
}

// findApplet returns the row of applet name: the table's, else the row of
// an installed MCP-projected tool of that name (projectedToolApplet makes
// it from the tool's install, as toolApplet does for a builtin tool).
func findApplet(e *cli.Env, name string) (cli.Applet, bool) {
	if a, ok := lookup(name); ok {
		return a, true
	}
	return mcp.ProjectedToolApplet(e, name)
}

func dispatch(e *cli.Env, name string, args []string) int {
	a, ok := findApplet(e, name)
	if !ok {
		cli.Errorf(e.Stderr, "ctx", "applet not found: %s (try: ctx --list)", name)
		return cli.NotFound
	}
	e.Name = a.Name
	return runRow(e, a, args)
}

func isHelpFlag(s string) bool { return s == "--help" || s == "-h" }

// printHelp prints the summary and synopsis of an applet (or a ctx
// subcommand page) from the embedded manual.
func printHelp(e *cli.Env, page string) int {
	text, ok := manual.Synopsis(page)
	if !ok {
		cli.Errorf(e.Stderr, page, "no manual page")
		return cli.Internal
	}
	io.WriteString(e.Stdout, text)
	return cli.OK
}

// Names returns the visible applet names in order, for --list and --install.
func Names() []string {
	var names []string
	for _, a := range table {
		if !a.Hidden {
			names = append(names, a.Name)
		}
	}
	return names
}
