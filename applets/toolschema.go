package applets

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"

	"ctx/fsops"
)

// toolSchema returns the input schema of a tool: its schema control beside
// the executable when readable, else the compiled-in schema.
func toolSchema(e *Env, t *builtinTool) ([]byte, error) {
	if dir := toolControlDir(e, t.Name); dir != "" {
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
	b, err := toolSchema(e, t)
	if err != nil {
		return fail(e, exitFailure, "%v", err)
	}
	e.Stdout.Write(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		e.Stdout.Write([]byte{'\n'})
	}
	return exitOK
}

// validateToolInput checks input against the tool's schema control.
func validateToolInput(e *Env, t *builtinTool, input map[string]any) error {
	b, err := toolSchema(e, t)
	if err != nil {
		return toolErr(syscall.EIO, exitFailure, "schema: %v", err)
	}
	var s struct {
		Required             []string                   `json:"required"`
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return toolErr(syscall.EIO, exitFailure, "schema: %v", err)
	}
	for _, k := range s.Required {
		if _, ok := input[k]; !ok {
			return inputErr("input: missing required field %q", k)
		}
	}
	if s.AdditionalProperties != nil && !*s.AdditionalProperties {
		for k := range input {
			if _, ok := s.Properties[k]; !ok {
				return inputErr("input: unexpected field %q", k)
			}
		}
	}
	return nil
}
