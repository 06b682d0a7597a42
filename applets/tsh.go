package applets

import (
	"io"
	"strings"

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

func init() { tsh.InProcess = runToolInProcess }

// runToolInProcess runs a builtin tool for tsh without a new process (see
// tsh.InProcess). Interactive tools and tools with their own applet runner
// are left to a real exec.
func runToolInProcess(name, object string, args, env []string, stdin io.Reader, stdout, stderr io.Writer) (int, bool) {
	t, ok := builtinTools[name]
	if !ok || t.Run == nil || t.Passthrough {
		return 0, false
	}
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	e := &Env{Name: name, Argv0: object, Stdin: stdin, Stdout: stdout, Stderr: stderr,
		Getenv: func(k string) string { return vars[k] }}
	return runBuiltinTool(e, t, args), true
}

// runTsh is the tsh applet, the tool shell; the work is in package tsh.
func runTsh(e *Env, args []string) int {
	return tsh.Run(tshEnv(e), args)
}

func tshEnv(e *Env) *tsh.Env {
	return &tsh.Env{Stdin: e.Stdin, Stdout: e.Stdout, Stderr: e.Stderr, Getenv: e.Getenv}
}

// tshTool is the metadata bootstrap writes for tool/tsh.
var tshTool = &builtinTool{
	Name:        "tsh",
	Description: "The tool shell: resolve a tool through CTX_PATH and run it, or a builtin (help, tools, which, load, pin, ...).",
	Cap:         "tsh",
	Schema:      tshSchema,
	Grants:      readersGrants,
}
