package toolrun

import (
	"io"
	"strings"

	"ctx/applets/cli"
	"ctx/applets/tsh"
)

// tshSchema is the input schema of the tsh tool: the tool-call form of one
// command line, {"args":["which","fs.read"]}. Additional properties are
// allowed (and ignored), as in the reference tool table.
const tshSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "tsh input",
  "description": "One tsh command line as words: a builtin or a tool found through CTX_PATH, and its arguments.",
  "type": "object",
  "properties": {
    "args": {"type": "array", "items": {"type": "string"}, "minItems": 1}
  },
  "required": ["args"],
  "additionalProperties": true
}
`

// tshTools is the tool runtime tsh is given (tsh.Tools): the broker, the
// in-process builtins and the host's record of tsh's refusals.
type tshTools struct{}

// Brokered asks the run host to run a tool call for tsh: builtin,
// third-party or MCP-projected alike.
func (tshTools) Brokered(c tsh.ToolCall) (int, bool) {
	if t, ok := BuiltinTools[c.Name]; ok && t.Passthrough {
		return 0, false
	}
	return BrokeredCall(EnvFromList(c.Name, "", c.Env, c.Stdin, c.Stdout, c.Stderr), c.Name, c.Args)
}

// HostRecords has the run host decide and record a call tsh refused.
func (tshTools) HostRecords(getenv func(string) string, tool string) bool {
	_, ok := AskDecision(&cli.Env{Name: "tsh", Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: getenv}, tool, false)
	return ok
}

// InProcess runs a builtin tool for tsh without a new process.
// Interactive tools and tools with their own applet runner are left to a
// real exec.
func (tshTools) InProcess(c tsh.ToolCall) (int, bool) {
	return runToolInProcess(c.Name, c.Object, c.Args, c.Env, c.Stdin, c.Stdout, c.Stderr)
}

// EnvFromList is an applet Env whose environment is the list env, not the
// process's.
func EnvFromList(name, argv0 string, env []string, stdin io.Reader, stdout, stderr io.Writer) *cli.Env {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	return &cli.Env{Name: name, Argv0: argv0, Stdin: stdin, Stdout: stdout, Stderr: stderr,
		Getenv: func(k string) string { return vars[k] }, Vars: env}
}

// runToolInProcess runs a builtin tool for tsh without a new process (see
// tsh.Tools).
func runToolInProcess(name, object string, args, env []string, stdin io.Reader, stdout, stderr io.Writer) (int, bool) {
	t, ok := BuiltinTools[name]
	if !ok || t.Run == nil || t.Passthrough {
		return 0, false
	}
	return RunTool(EnvFromList(name, object, env, stdin, stdout, stderr), t, args), true
}

// RunTsh is the tsh applet, the tool shell; the work is in package tsh.
func RunTsh(e *cli.Env, args []string) int {
	return tsh.Run(TshEnv(e), args)
}

func TshEnv(e *cli.Env) *tsh.Env {
	return &tsh.Env{Stdin: e.Stdin, Stdout: e.Stdout, Stderr: e.Stderr, Getenv: e.Getenv, Tools: tshTools{}}
}

// TshTool is the metadata bootstrap writes for tool/tsh.
var TshTool = &BuiltinTool{
	Name:        "tsh",
	Description: "The tool shell: resolve a tool through CTX_PATH and run it, or a builtin (help, tools, which, load, pin, ...).",
	Cap:         "tsh",
	Schema:      tshSchema,
	Grants:      readersGrants,
}
