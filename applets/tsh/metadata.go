package tsh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"ctx/fsops"
	"ctx/policy/sandboxplan"
)

// Metadata is what tsh shows and loads about a tool: its description and
// the human parts of its input schema. It is read from the control
// directory beside the executable, bounded and without following symlinks,
// and it is untrusted text: printers escape it for the terminal.
type Metadata struct {
	Description       string   // tool.d/description, trailing newlines removed
	SchemaTitle       string   // "title" of tool.d/schema
	SchemaDescription string   // "description" of tool.d/schema
	Required          []string // "required" of tool.d/schema
}

// FirstLine returns the first line of the description.
func (m Metadata) FirstLine() string {
	line, _, _ := strings.Cut(m.Description, "\n")
	return line
}

// readMetadata reads description and schema of a tool. Missing files (or a
// missing control directory) mean empty metadata; a symlinked control
// directory or file, an oversized file or a schema that is not a JSON
// object with string title/description and a string-array required is an
// error naming the file.
func readMetadata(hit fsops.ToolHit) (Metadata, error) {
	var m Metadata
	st, err := os.Lstat(hit.ControlDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return m, nil
	case err != nil:
		return m, err
	case st.Mode()&fs.ModeSymlink != 0:
		return m, &os.PathError{Op: "open", Path: hit.ControlDir, Err: fsops.ErrSymlink}
	case !st.IsDir():
		return m, &os.PathError{Op: "open", Path: hit.ControlDir, Err: errors.New("not a directory")}
	}
	files, err := fsops.ReadControls(hit.ControlDir, []string{"description", "schema"})
	if err != nil {
		return m, err
	}
	m.Description = strings.TrimRight(string(files["description"]), "\n")
	b, ok := files["schema"]
	if !ok {
		b, ok = selfDescribedSchema(hit)
	}
	if ok {
		var s struct {
			Title       string   `json:"title"`
			Description string   `json:"description"`
			Required    []string `json:"required"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			return m, fmt.Errorf("%s: invalid schema: %v", filepath.Join(hit.ControlDir, "schema"), err)
		}
		m.SchemaTitle, m.SchemaDescription, m.Required = s.Title, s.Description, s.Required
	}
	return m, nil
}

// terminalTool reports whether a tool's cap control says "terminal": an
// interactive program (bash, tmux, zellij) that reads its commands from
// stdin rather than one JSON object. Read bounded, without following
// symlinks; an unreadable cap is not a terminal tool.
func terminalTool(hit fsops.ToolHit) bool {
	files, err := fsops.ReadControls(hit.ControlDir, []string{"cap"})
	return err == nil && strings.TrimSpace(string(files["cap"])) == "terminal"
}

// selfDescribedSchema is, inside a run, the input schema a tool without a
// schema control gave of itself (its --agentrc-schema or its sibling
// NAME.toolspec.json), as the run host wrote it into the tool's toolspec
// at /mnt/tools/NAME.toolspec.json; outside a run there is none.
func selfDescribedSchema(hit fsops.ToolHit) ([]byte, bool) {
	p, ok := sandboxplan.MntToolSpecPath(hit.Name, func(p string) bool { _, err := os.Lstat(p); return err == nil })
	if !ok {
		return nil, false
	}
	b, err := fsops.ReadControl(p)
	if err != nil {
		return nil, false
	}
	var spec struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if json.Unmarshal(b, &spec) != nil || len(spec.InputSchema) < 3 {
		return nil, false // {} describes nothing
	}
	return spec.InputSchema, true
}
