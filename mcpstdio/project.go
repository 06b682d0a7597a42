package mcpstdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"ctx/fsops/object"
	"ctx/policy"
)

// Projection describes how a server's tools become manifest candidates.
type Projection struct {
	Server        string // the server's name in the config: the projected names' prefix
	Executable    string // absolute path of the ctx binary
	ExecSHA256    string
	RuntimeConfig string // absolute config path the tools will read at call time
	EntrySHA256   string // EntryDigest of the server's entry, verified at call time; "" for none
	Policy        string // the tool policy control, possibly empty
}

// Candidate is one generated manifest.
type Candidate struct {
	Name     string // SERVER.TOOL
	File     string // SERVER.TOOL.manifest.json
	Manifest []byte
	Notes    []string // what of the remote description was left out, and why
}

// Skipped is a remote tool that was left out, with the reason.
type Skipped struct {
	Name   string
	Reason string
}

// Project turns a server's tool list into v2 manifest candidates, one per
// tool, named exactly SERVER.TOOL (no implicit prefix). It fails without
// producing anything when a name is invalid, repeated, or a tool's input
// schema is not an object schema that compiles; tools that require MCP
// tasks (execution.taskSupport "required") are skipped and reported,
// because a projected tool makes one plain tools/call. Every candidate is
// checked by object.ParseManifest, so it is exactly what `ctx object check`
// will accept.
//
// The remote title and annotations become the annotations control (the
// top-level title wins over annotations.title, as MCP displays it; hints
// that are not booleans and unknown fields are left out), and the remote
// outputSchema the output.schema control when it is an object schema ctx
// can compile; what is left out is noted on the candidate, never fatal.
//
// A server named like a builtin tool group (object.ReservedToolGroups:
// fs, shell, tsh, agent) is refused: SERVER.TOOL would land in the
// builtin group, and a projected fs.read would shadow the builtin.
func Project(p Projection, tools []Tool) ([]Candidate, []Skipped, error) {
	if err := policy.ValidName(p.Server); err != nil {
		return nil, nil, fmt.Errorf("server: %v", err)
	}
	if object.IsReservedToolGroup(p.Server) {
		return nil, nil, fmt.Errorf("server name %q is the group of ctx's builtin tools (%s.*): its tools would shadow them; give the server another name in the config", p.Server, p.Server)
	}
	seen := map[string]bool{}
	var out []Candidate
	var skipped []Skipped
	for _, t := range tools {
		name := p.Server + "." + t.Name
		if err := policy.ValidName(name); err != nil {
			return nil, nil, fmt.Errorf("tool %q: projected name: %v", t.Name, err)
		}
		if err := policy.ValidName(t.Name); err != nil {
			return nil, nil, fmt.Errorf("tool %q: %v", t.Name, err)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("tool %q listed twice", t.Name)
		}
		seen[name] = true
		if t.TaskSupport == "required" {
			skipped = append(skipped, Skipped{name, `execution.taskSupport is "required" (MCP tasks are not supported)`})
			continue
		}
		schemaText, err := inputSchemaControl(t.InputSchema)
		if err != nil {
			return nil, nil, fmt.Errorf("tool %q: inputSchema: %v", t.Name, err)
		}
		loc := object.Locator{Transport: "stdio", Config: p.RuntimeConfig, Server: p.Server, Tool: t.Name, SHA256: p.EntrySHA256}
		m := &object.Manifest{
			Schema:      object.SchemaV2,
			Version:     object.CortexFSVersion,
			Requirement: object.CortexFSRequirement,
			Class:       "tool",
			Name:        name,
			ExecPath:    p.Executable,
			SHA256:      p.ExecSHA256,
			Controls: map[string]string{
				"description": cleanDescription(t.Description),
				"schema":      schemaText,
				"cap":         "mcp",
				"policy":      p.Policy,
				"mcp":         loc.JSON(),
			},
		}
		var notes []string
		if a, note := projectAnnotations(t); !a.IsZero() {
			m.Controls["annotations"] = a.JSON()
		} else if note != "" {
			notes = append(notes, note)
		}
		if len(t.OutputSchema) > 0 {
			var b bytes.Buffer
			_ = json.Compact(&b, t.OutputSchema)
			if err := object.ValidateControl("tool", "output.schema", b.Bytes()); err != nil {
				notes = append(notes, "outputSchema left out: "+err.Error())
			} else {
				m.Controls["output.schema"] = b.String()
			}
		}
		data := m.Encode()
		if _, err := object.ParseManifest(data); err != nil {
			return nil, nil, fmt.Errorf("tool %q: generated manifest is invalid: %v", t.Name, err)
		}
		out = append(out, Candidate{Name: name, File: name + ".manifest.json", Manifest: data, Notes: notes})
	}
	return out, skipped, nil
}

// inputSchemaControl compacts an input schema into the `schema` control,
// requiring type "object" as MCP does.
func inputSchemaControl(raw json.RawMessage) (string, error) {
	var s struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	if string(s.Type) != `"object"` {
		return "", fmt.Errorf(`type must be "object"`)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// cleanDescription makes a remote description a valid control value: CRLF
// becomes LF and any other control character a space.
func cleanDescription(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// projectAnnotations turns a remote tool's title and annotations into the
// annotations control: the title (top-level first, then annotations.title)
// cleaned to one line of at most object.MaxTitle bytes, and the four hints
// that are booleans. note says what was left out when nothing is usable.
func projectAnnotations(t Tool) (object.Annotations, string) {
	var a object.Annotations
	var remote struct {
		Title           json.RawMessage `json:"title"`
		ReadOnlyHint    json.RawMessage `json:"readOnlyHint"`
		DestructiveHint json.RawMessage `json:"destructiveHint"`
		IdempotentHint  json.RawMessage `json:"idempotentHint"`
		OpenWorldHint   json.RawMessage `json:"openWorldHint"`
	}
	note := ""
	if len(t.Annotations) > 0 && json.Unmarshal(t.Annotations, &remote) != nil {
		note = "annotations left out: not a JSON object"
	}
	title := t.Title
	if title == "" {
		_ = json.Unmarshal(remote.Title, &title)
	}
	a.Title = cleanTitle(title)
	for _, h := range []struct {
		raw json.RawMessage
		dst **bool
	}{{remote.ReadOnlyHint, &a.ReadOnlyHint}, {remote.DestructiveHint, &a.DestructiveHint},
		{remote.IdempotentHint, &a.IdempotentHint}, {remote.OpenWorldHint, &a.OpenWorldHint}} {
		var b bool
		if string(h.raw) == "true" || string(h.raw) == "false" {
			b = string(h.raw) == "true"
			*h.dst = &b
		}
	}
	return a, note
}

// cleanTitle makes a remote title a valid annotations title: control
// characters become spaces, surrounding space goes, and it is cut to
// object.MaxTitle bytes on a character boundary.
func cleanTitle(s string) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s))
	for len(s) > object.MaxTitle {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return strings.TrimSpace(s)
}
