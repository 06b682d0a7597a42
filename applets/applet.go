// Package applets holds the applet table of the ctx multicall binary and one
// thin adapter per applet. An applet parses its arguments, calls the policy,
// fsops, ptyterm or mcpstdio packages, prints, and returns an exit code; only
// main calls os.Exit.
package applets

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"ctx/applets/cli"
	"ctx/manual"
)

// Env is the I/O and environment an applet runs with. Applets never touch
// os.Args, os.Stdin/Stdout/Stderr or os.Getenv directly, so they can be run
// in-process by tests and by each other.
type Env struct {
	Name   string // the applet name as dispatched
	Argv0  string // argv[0] exactly as the process received it
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Vars is the environment as a list when it is not the process's
	// (a tool tsh runs in its own process); nil means os.Environ.
	Vars []string
	// decidedByHost is set for the one call a warm tool worker runs
	// (tool_worker.go): the run host has decided it against the live
	// tree already, so runTool does not decide it again. It travels
	// with this Env (and its copies) only: an Env made afresh (a tool
	// tsh runs in-process, whose environment has no CTX_BROKERED, so
	// the host is asked for it) decides for itself.
	decidedByHost bool
}

// Environ is the environment as a list, for a program an applet starts:
// a copy of Vars, or of the process's environment when Vars is nil (Getenv
// is then os.Getenv or reads the same). It is the one place an applet's
// environment list comes from, as Getenv is for one variable.
func (e *Env) Environ() []string {
	if e.Vars != nil {
		return append([]string(nil), e.Vars...)
	}
	return os.Environ()
}

// Applet is one row of the dispatch table (table.go): an applet, a ctx
// command or a verb of either.
type Applet struct {
	Name string
	// Run runs the row with its arguments; nil for a row of Verbs only.
	Run func(e *Env, args []string) int
	// Page is the manual page that documents the row (NAME.md,
	// ctx-CMD.md), whose synopsis `--help` prints; verbs are documented on
	// their command's page.
	Page string
	// Verbs are the row's verbs (ctx's commands, `ctx agent start`,
	// `ctxmcp serve`); without a Run, the one the first argument names
	// runs (runVerbs).
	Verbs []Applet
	// Missing and Unknown, when set, are the usage errors for a missing
	// verb and (a format given the verb) an unknown one, as that command
	// has always worded them; otherwise "missing verb (V1, V2)" and
	// "unknown verb X (V1, V2)".
	Missing, Unknown string
	// NameVerb makes the verb part of the name errors are printed under
	// ("ctx agent start: ..."); ctxmcp and ctx object print under their own.
	NameVerb bool
	// Tool marks a tool applet: it answers --agentrc-schema with its input
	// JSON Schema and is installed by bootstrap into tool/.
	Tool bool
	// Hidden marks an internal re-exec target (sandbox child, run host):
	// not listed, not installed, no manual page required.
	Hidden bool
}

var table []Applet

// lookup returns the applet called name.
func lookup(name string) (Applet, bool) {
	i := sort.Search(len(table), func(i int) bool { return table[i].Name >= name })
	if i < len(table) && table[i].Name == name {
		return table[i], true
	}
	return Applet{}, false
}

// Main dispatches argv to an applet and returns the exit code.
func Main(argv []string) int {
	// A tool process the init started for a call takes its call channel
	// before it starts anything (broker_client.go).
	claimCallChannel()
	return runMain(processEnv(), argv)
}

// processEnv is the Env of this process: its standard descriptors and
// environment.
func processEnv() *Env {
	return &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// runMain is Main with the Env to run in (a warm tool worker's says the
// host decided the call).
func runMain(e *Env, argv []string) int {
	if len(argv) == 0 {
		argv = []string{"ctx"}
	}
	e.Argv0 = argv[0]
	// A login shell gets "-name" as argv[0]; busybox strips the dash too.
	name := strings.TrimPrefix(filepath.Base(argv[0]), "-")
	// /mnt/mcp/SERVER/TOOL is named after the MCP tool, not the ctx tool
	// it projects: it runs as that tool, found through CTX_PATH.
	if n, exe, ok := mntTool(e, argv[0]); ok {
		e.Argv0 = exe
		a, ok := findApplet(e, n)
		if !ok {
			return runThirdPartyTool(e, n, exe, argv[1:])
		}
		e.Name = a.Name
		return runRow(e, a, argv[1:])
	}
	return dispatch(e, name, argv[1:])
}

// findApplet returns the row of applet name: the table's, else the row of
// an installed MCP-projected tool of that name (projectedToolApplet makes
// it from the tool's install, as toolApplet does for a builtin tool).
func findApplet(e *Env, name string) (Applet, bool) {
	if a, ok := lookup(name); ok {
		return a, true
	}
	return projectedToolApplet(e, name)
}

func dispatch(e *Env, name string, args []string) int {
	a, ok := findApplet(e, name)
	if !ok {
		cli.Errorf(e.Stderr, "ctx", "applet not found: %s (try: ctx --list)", name)
		return exitNotFound
	}
	e.Name = a.Name
	return runRow(e, a, args)
}

func isHelpFlag(s string) bool { return s == "--help" || s == "-h" }

// printHelp prints the summary and synopsis of an applet (or a ctx
// subcommand page) from the embedded manual.
func printHelp(e *Env, page string) int {
	text, ok := manual.Synopsis(page)
	if !ok {
		cli.Errorf(e.Stderr, page, "no manual page")
		return exitInternal
	}
	io.WriteString(e.Stdout, text)
	return exitOK
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

// ToolNames returns the names of the tool applets.
func ToolNames() []string {
	var names []string
	for _, a := range table {
		if a.Tool && !a.Hidden {
			names = append(names, a.Name)
		}
	}
	return names
}
