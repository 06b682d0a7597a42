package cli

import (
	"bytes"
	"io"
	"os"
	"strings"
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
	// Exits says the applet is the one this process was started as,
	// which ends when it returns: what it sets up for the process (a
	// signal handler) need not be undone, nor set up before it is needed.
	Exits bool
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

// appletLookup finds a row of the dispatch table by name. The table lives
// in package applets, above every sub-package; it registers its lookup
// here (setAppletLookup) so the run host and the tool runner can ask
// whether a name is an applet without importing the table.
var appletLookup func(name string) (Applet, bool)

func SetAppletLookup(f func(name string) (Applet, bool)) { appletLookup = f }

// LookupApplet is appletLookup, false before the table registered.
func LookupApplet(name string) (Applet, bool) {
	if appletLookup == nil {
		return Applet{}, false
	}
	return appletLookup(name)
}

// BufferEnv is an Env on memory: stdin from a string, output into the
// returned buffers, the environment from a map. Tests run applets in it.
func BufferEnv(stdin string, env map[string]string) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Env{Name: "test", Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] }}, &out, &errb
}
