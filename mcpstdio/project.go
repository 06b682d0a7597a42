package mcpstdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"ctx/fsops/object"
	"ctx/policy"
)

// Projection describes how a server's tools become manifest candidates.
type Projection struct {
	Server        string // the server's name in the config: the projected names' prefix
	Executable    string // absolute path of the ctx binary
	ExecSHA256    string
	RuntimeConfig string // absolute config path the tools will read at call time
	ConfigSHA256  string // digest of that config, verified at call time
	Policy        string // the tool policy control, possibly empty
}

// Candidate is one generated manifest.
type Candidate struct {
	Name     string // SERVER.TOOL
	File     string // SERVER.TOOL.manifest.json
	Manifest []byte
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
func Project(p Projection, tools []Tool) ([]Candidate, []Skipped, error) {
	if err := policy.ValidName(p.Server); err != nil {
		return nil, nil, fmt.Errorf("server: %v", err)
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
		loc := object.Locator{Transport: "stdio", Config: p.RuntimeConfig, Server: p.Server, Tool: t.Name, SHA256: p.ConfigSHA256}
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
		data := m.Encode()
		if _, err := object.ParseManifest(data); err != nil {
			return nil, nil, fmt.Errorf("tool %q: generated manifest is invalid: %v", t.Name, err)
		}
		out = append(out, Candidate{Name: name, File: name + ".manifest.json", Manifest: data})
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
