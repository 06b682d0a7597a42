package toolrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"ctx/applets/cli"
	"ctx/applets/tsh"
	"ctx/fsops"
	"ctx/policy"
)

// tshConfigSchema is the input schema of tsh.config. Unlike the reference
// (additionalProperties true) unknown keys are refused, so a misspelt
// setting is an error instead of a silent no-op.
const tshConfigSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "tsh.config input",
  "description": "Read (no keys) or update the tsh runtime configuration CTX_ROOT/tool/tsh.d/config.",
  "type": "object",
  "properties": {
    "max_loaded_tools": {"type": "integer", "minimum": 1, "maximum": 1024},
    "cache_capacity": {"type": "integer", "minimum": 1, "maximum": 1024},
    "window_percent": {"type": "integer", "minimum": 1, "maximum": 100},
    "path": {"type": "string"}
  },
  "additionalProperties": false
}
`

// RunTshConfig is the tsh.config tool applet, for the root CTX_ROOT (or
// /ctx).
func RunTshConfig(e *cli.Env, args []string) int {
	return TshConfig(e, fsops.SelectRoot("", e.Getenv), args)
}

// TshConfig reads or updates ROOT/tool/tsh.d/config. Input is one JSON
// object, from the single argument or from stdin (none, or an empty
// input, is {}). With no setting key it prints the current configuration;
// with any, it merges them into the file and replaces it atomically. It
// prints the file's path and then its normalized content. On any refusal
// the file is left exactly as it was.
func TshConfig(e *cli.Env, root fsops.Root, args []string) int {
	if len(args) > 1 {
		return cli.UsageError(e, "expects one JSON object (as the argument or on stdin)")
	}
	text, err := tshConfigInput(e, args)
	if err != nil {
		return cli.Fail(e, cli.Usage, "EINVAL: %v", err)
	}
	if len(bytes.TrimSpace(text)) == 0 {
		text = []byte("{}")
	}
	var in map[string]json.RawMessage
	if !json.Valid(text) {
		return cli.Fail(e, cli.Usage, "EINVAL: invalid JSON input")
	}
	if err := json.Unmarshal(text, &in); err != nil || in == nil {
		return cli.Fail(e, cli.Usage, "EINVAL: input must be a JSON object")
	}
	path := tsh.ConfigPath(root)
	if raw, ok := in["path"]; ok {
		var p string
		if json.Unmarshal(raw, &p) != nil || p != path {
			return cli.Fail(e, cli.Denied, "EACCES: tsh.config path is restricted to %s", path)
		}
	}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	updates := map[string]string{}
	for _, k := range keys {
		if k == "path" {
			continue
		}
		s, ok := policy.LookupTshSetting(k)
		if !ok {
			return cli.Fail(e, cli.Usage, "EINVAL: unknown key %q (known: max_loaded_tools, cache_capacity, window_percent, path)", k)
		}
		v := string(in[k])
		if len(v) > 0 && v[0] == '"' {
			return cli.Fail(e, cli.Usage, "EINVAL: %s must be a JSON number, not a string", k)
		}
		if _, err := s.Parse(v); err != nil {
			return cli.Fail(e, cli.Usage, "EINVAL: %s", err)
		}
		updates[k] = v
	}

	cfg := policy.DefaultTshConfig()
	old, err := tsh.ReadConfigFile(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return cli.Fail(e, cli.Failure, "%v", err)
	default:
		if cfg, err = policy.ParseTshConfig(old); err != nil {
			return cli.Fail(e, cli.Usage, "EINVAL: %s: %s (fix or remove the file)", path, err)
		}
	}
	if len(updates) > 0 {
		for k, v := range updates {
			s, _ := policy.LookupTshSetting(k)
			_ = s.Set(&cfg, v) // checked above
		}
		if err := ensureConfigDir(filepath.Dir(path)); err != nil {
			return cli.Fail(e, cli.Failure, "%v", err)
		}
		if err := fsops.WriteAtomic(path, cfg.Format(), 0o644); err != nil {
			return cli.Fail(e, cli.Failure, "%v", err)
		}
	}
	fmt.Fprintf(e.Stdout, "%s\n%s", cli.Escape(path), cfg.Format())
	return cli.OK
}

// toolInput returns a tool's JSON input: the single argument, or stdin
// when there is none and stdin is not a terminal (a terminal means the
// empty input, not a wait for typing). Stdin is bounded by maxToolInput.
func tshConfigInput(e *cli.Env, args []string) ([]byte, error) {
	if len(args) == 1 {
		return []byte(args[0]), nil
	}
	if e.Stdin == nil {
		return nil, nil
	}
	if f, ok := e.Stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&fs.ModeCharDevice != 0 {
			return nil, nil
		}
	}
	return readStdin(e.Stdin, maxToolInput)
}

// ensureConfigDir creates ROOT/tool/tsh.d when it is missing (the tool tier
// itself must exist) and refuses a symlink or non-directory there.
func ensureConfigDir(dir string) error {
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		return fsops.SyncDir(filepath.Dir(dir))
	case err != nil:
		return err
	case st.Mode()&fs.ModeSymlink != 0:
		return &os.PathError{Op: "open", Path: dir, Err: fsops.ErrSymlink}
	case !st.IsDir():
		return &os.PathError{Op: "open", Path: dir, Err: errors.New("not a directory")}
	}
	return nil
}

// TshConfigTool is the metadata bootstrap writes for tool/tsh.config.
var TshConfigTool = &BuiltinTool{
	Name:        "tsh.config",
	Description: "Read or update the tsh runtime configuration (tool/tsh.d/config) atomically.",
	Cap:         "tsh.config",
	Schema:      tshConfigSchema,
	Grants:      readersGrants,
}
