package toolrun

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy/schema"
)

// toolSchema returns the input schema of a tool: the schema control in its
// control directory dir when readable, else the compiled-in schema.
func toolSchema(dir string, t *BuiltinTool) ([]byte, error) {
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

// PrintToolSchema answers `TOOL --agentrc-schema` with the tool's
// toolspec: its input schema (the schema control, else the compiled-in
// one) and its output schema, the same bytes as /mnt/tools/NAME.toolspec.json.
func PrintToolSchema(e *cli.Env, name string) int {
	t, ok := BuiltinTools[name]
	if !ok {
		return cli.Fail(e, cli.NotFound, "no schema")
	}
	ctl := toolControlDir(e, name)
	b, err := toolSchema(ctl, t)
	if err != nil {
		return cli.Fail(e, cli.Failure, "%v", err)
	}
	e.Stdout.Write(toolSpecOf(name, ctl, b, t))
	return cli.OK
}

// validateToolInput checks a tool's input against its schema control (or,
// without one, the compiled-in schema; with neither there is no
// constraint). An unusable schema control is the object's fault, not the
// caller's: EIO, exit 69, the tool is unavailable until it is mended.
func validateToolInput(dir string, t *BuiltinTool, input map[string]any) error {
	b, err := toolSchema(dir, t)
	if err != nil {
		return ToolErr(syscall.EIO, cli.Unavailable, "schema control: %v", err)
	}
	if len(b) == 0 {
		return nil
	}
	compiled, err := schema.Compile(b)
	if err != nil {
		return ToolErr(syscall.EIO, cli.Unavailable, "schema control %s: %v", filepath.Join(dir, "schema"), err)
	}
	if err := compiled.Validate(input); err != nil {
		return InputErr("input %v", err)
	}
	return nil
}

// ValidateJSONInput checks a third-party tool's input, given as one JSON
// object argument, against its schema control; no control, no constraint.
func ValidateJSONInput(dir string, raw json.RawMessage) error {
	input, _, err := DecodeInputObject(raw)
	if err != nil {
		return err
	}
	return validateToolInput(dir, &BuiltinTool{}, input)
}
