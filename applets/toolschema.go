package applets

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"

	"ctx/fsops"
	"ctx/policy/schema"
)

// toolSchema returns the input schema of a tool: the schema control in its
// control directory dir when readable, else the compiled-in schema.
func toolSchema(dir string, t *builtinTool) ([]byte, error) {
	if dir != "" {
		b, err := fsops.ReadControl(filepath.Join(dir, "schema"))
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return []byte(t.Schema), nil
}

// printToolSchema answers `TOOL --agentrc-schema`.
func printToolSchema(e *Env, name string) int {
	t, ok := builtinTools[name]
	if !ok {
		return fail(e, exitNotFound, "no schema")
	}
	b, err := toolSchema(toolControlDir(e, name), t)
	if err != nil {
		return fail(e, exitFailure, "%v", err)
	}
	e.Stdout.Write(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		e.Stdout.Write([]byte{'\n'})
	}
	return exitOK
}

// validateBuiltinInput checks a builtin tool's input against its schema
// control (or, without one, the compiled-in schema). An unusable schema
// control is the object's fault, not the caller's: EIO, exit 1.
func validateBuiltinInput(dir string, t *builtinTool, input map[string]any) error {
	b, err := toolSchema(dir, t)
	if err != nil {
		return toolErr(syscall.EIO, exitFailure, "schema: %v", err)
	}
	compiled, err := schema.Compile(b)
	if err != nil {
		return toolErr(syscall.EIO, exitFailure, "schema: %v", err)
	}
	if err := compiled.Validate(input); err != nil {
		return inputErr("input %v", err)
	}
	return nil
}
