package toolrun

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// The agentrc /mnt profile (ctx man agentrc) beyond the plan itself: the
// toolspec files, and how a tool run by its /mnt path finds itself (the
// SOP's digest: agentrc_sop.go; skills: agentrc_skills.go).

// ToolSpec is a tool's NAME.toolspec.json: the shape of an MCP tools/list
// entry (name, description, inputSchema, outputSchema and annotations where
// the tool has them), so an agent harness can register the tool as it
// reads it. It is also what `NAME --agentrc-schema` prints (the profile's
// "schema describing its arguments and output"): both conventions give the
// same bytes. The input schema is the schema control; the output schema is
// the `output.schema` control (an MCP tool's outputSchema, stored at
// projection), else the `program` control (bootstrap writes one for each
// builtin: builtinPrograms); annotations are the `annotations` control.
// All of it describes; none of it grants anything or is checked against
// what the tool prints.
func ToolSpec(name, ctl string, input []byte) []byte {
	return toolSpecOf(name, ctl, input, nil)
}

// toolSpecOf is toolSpec with the compiled-in description, output schema
// and annotations of builtin t standing in for missing controls (a
// builtin asked --agentrc-schema outside a tree).
func toolSpecOf(name, ctl string, input []byte, t *BuiltinTool) []byte {
	spec := struct {
		Name         string          `json:"name"`
		Description  string          `json:"description,omitempty"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
		Annotations  json.RawMessage `json:"annotations,omitempty"`
	}{Name: name, InputSchema: jsonObject(input)}
	if spec.InputSchema == nil {
		spec.InputSchema = json.RawMessage("{}")
	}
	control := func(c string) []byte {
		if ctl == "" {
			return nil
		}
		b, _ := fsops.ReadControl(filepath.Join(ctl, c))
		return b
	}
	if d := control("description"); d != nil {
		spec.Description = strings.TrimSpace(string(d))
	} else if t != nil {
		spec.Description = t.Description
	}
	for _, c := range []string{"output.schema", "program"} {
		if spec.OutputSchema = jsonObject(control(c)); spec.OutputSchema != nil {
			break
		}
	}
	if spec.OutputSchema == nil && t != nil {
		spec.OutputSchema = jsonObject([]byte(BuiltinPrograms[name]))
	}
	spec.Annotations = jsonObject(control("annotations"))
	if spec.Annotations == nil && t != nil {
		spec.Annotations = jsonObject([]byte(BuiltinAnnotations[name]))
	}
	return toolSpecJSON(spec)
}

// toolSpecJSON is a toolspec's file: Encode leaves < > & as they are
// (Marshal would escape them for HTML) and ends the object with the
// newline the file has; "{}" when spec cannot be encoded.
func toolSpecJSON(spec any) []byte {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(spec) != nil {
		return []byte("{}\n")
	}
	return out.Bytes()
}

// jsonObject returns b compacted when it is one JSON object, else nil.
func jsonObject(b []byte) json.RawMessage {
	// Compact checks the whole text; a valid text whose first byte is {
	// is an object. (Unmarshalling into a map checked the same and also
	// built the map, for every tool of every start.)
	var out bytes.Buffer
	if json.Compact(&out, b) != nil || out.Len() == 0 || out.Bytes()[0] != '{' {
		return nil
	}
	return out.Bytes()
}

// WithToolSpecs replaces each projected tool's input schema with its
// toolspec, which the plan writes beside /mnt/tools/NAME and
// /mnt/mcp/SERVER/TOOL.
func WithToolSpecs(tools []sandboxplan.ProjectedTool) {
	for i := range tools {
		if tools[i].SelfSpec != nil {
			tools[i].Schema = tools[i].SelfSpec
			continue
		}
		tools[i].Schema = ToolSpec(tools[i].Name, tools[i].HostDotD, tools[i].Schema)
	}
}

// MntTool maps an executable path under agentrc's /mnt to the tool it
// projects, for tools that find their control directory beside their
// executable (MCP-projected tools; builtin applets know themselves by
// name): /mnt/mcp/SERVER/TOOL is the tool whose mcp locator names that
// server and MCP tool, /mnt/tools/NAME the tool NAME, each in the first
// tier of CTX_PATH that holds it. It returns the tool's name and its path
// in that tier, which dispatch then runs as if invoked there. Which tool
// runs is no authority: the call is checked (and brokered) by name.
func MntTool(e *cli.Env, argv0 string) (name, exe string, ok bool) {
	if !strings.HasPrefix(argv0, sandboxplan.SandboxMnt+"/") {
		return "", "", false
	}
	p := path.Clean(argv0)
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	var tiers []string
	for _, t := range filepath.SplitList(e.Getenv("CTX_PATH")) {
		if filepath.IsAbs(t) {
			tiers = append(tiers, t)
		}
	}
	switch {
	case dir == sandboxplan.SandboxMnt+"/tools" && policy.ValidName(base) == nil:
		if _, isApplet := cli.LookupApplet(base); isApplet {
			return "", "", false
		}
		for _, t := range tiers {
			if st, err := os.Lstat(filepath.Join(t, base)); err == nil && st.Mode().IsRegular() {
				return base, filepath.Join(t, base), true
			}
		}
	case path.Dir(dir) == sandboxplan.SandboxMnt+"/mcp" && policy.ValidName(base) == nil:
		server := path.Base(dir)
		matches := func(t, n string) bool {
			loc, err := fsops.ReadControl(filepath.Join(t, n+".d", "mcp"))
			if err != nil {
				return false
			}
			l, err := object.ParseLocator(loc)
			st, serr := os.Lstat(filepath.Join(t, n))
			return err == nil && l.Server == server && l.Tool == base && serr == nil && st.Mode().IsRegular()
		}
		for _, t := range tiers {
			// ctxmcp project names a tool SERVER.TOOL; any other name is
			// found by its locator.
			if n := server + "." + base; matches(t, n) {
				return n, filepath.Join(t, n), true
			}
			entries, _ := os.ReadDir(t)
			for _, en := range entries {
				if n, ok := strings.CutSuffix(en.Name(), ".d"); ok && policy.ValidName(n) == nil && matches(t, n) {
					return n, filepath.Join(t, n), true
				}
			}
		}
	}
	return "", "", false
}
