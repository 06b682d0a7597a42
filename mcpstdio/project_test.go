package mcpstdio

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"ctx/fsops/object"
)

func projection() Projection {
	return Projection{
		Server: "github", Executable: "/ctx/bin/ctx", ExecSHA256: strings.Repeat("a", 64),
		RuntimeConfig: "/workspace/.mcp.json", EntrySHA256: strings.Repeat("b", 64),
	}
}

func remote(name string, schema string) Tool {
	return Tool{Name: name, Description: "does " + name, InputSchema: json.RawMessage(schema)}
}

func TestProject(t *testing.T) {
	p := projection()
	p.Policy = "allow coder_t tool:github.search_issues execute\n"
	withTasks := remote("research", `{"type":"object"}`)
	withTasks.TaskSupport = "required"
	desc := remote("search_issues", `{ "type": "object", "$schema": "http://json-schema.org/draft-07/schema#", "properties": {"q": {"type": "string"}} }`)
	desc.Description = "Search.\r\nIssues\x1b[1m"
	cands, skipped, err := Project(p, []Tool{desc, withTasks})
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != 1 || len(skipped) != 1 || skipped[0].Name != "github.research" {
		t.Fatalf("candidates %v skipped %v", cands, skipped)
	}
	c := cands[0]
	if c.Name != "github.search_issues" || c.File != "github.search_issues.manifest.json" {
		t.Fatalf("%+v", c)
	}
	m, err := object.ParseManifest(c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"description": "Search.\nIssues [1m",
		"schema":      `{"type":"object","$schema":"http://json-schema.org/draft-07/schema#","properties":{"q":{"type":"string"}}}`,
		"cap":         "mcp",
		"policy":      p.Policy,
		"mcp":         `{"transport":"stdio","config":"/workspace/.mcp.json","server":"github","tool":"search_issues","sha256":"` + strings.Repeat("b", 64) + `"}`,
	}
	for k, v := range want {
		if m.Controls[k] != v {
			t.Errorf("control %s = %q, want %q", k, m.Controls[k], v)
		}
	}
	if m.Schema != object.SchemaV2 || m.ExecPath != "/ctx/bin/ctx" || m.Requirement != object.CortexFSRequirement {
		t.Errorf("%+v", m)
	}
}

func TestProjectRefuses(t *testing.T) {
	long := strings.Repeat("x", 60)
	tests := []struct {
		tools []Tool
		want  string
	}{
		{[]Tool{remote("a", `{"type":"object"}`), remote("a", `{"type":"object"}`)}, `tool "a" listed twice`},
		{[]Tool{remote("bad/name", `{"type":"object"}`)}, `tool "bad/name": projected name`},
		{[]Tool{remote("_x", `{"type":"object"}`)}, `tool "_x": invalid name`},
		{[]Tool{remote(long, `{"type":"object"}`)}, "longer than 64 bytes"},
		{[]Tool{remote("x.sock", `{"type":"object"}`)}, `must not end in ".sock"`},
		{[]Tool{remote("arr", `{"type":"array"}`)}, `inputSchema: type must be "object"`},
		{[]Tool{remote("untyped", `{}`)}, `type must be "object"`},
		{[]Tool{remote("bad", `{"type":"object","properties":{"a":{"type":"float"}}}`)}, "generated manifest is invalid"},
	}
	for _, tc := range tests {
		_, _, err := Project(projection(), tc.tools)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.tools[0].Name, err, tc.want)
		}
	}
	p := projection()
	p.Server = "bad server"
	if _, _, err := Project(p, nil); err == nil {
		t.Error("bad server name accepted")
	}
	for _, g := range []string{"fs", "shell", "tsh", "agent"} {
		p = projection()
		p.Server = g
		if _, _, err := Project(p, []Tool{remote("read", `{"type":"object"}`)}); err == nil || !strings.Contains(err.Error(), "builtin tools") {
			t.Errorf("server %s: %v", g, err)
		}
	}
	p = projection()
	p.Policy = "allow x\n"
	if _, _, err := Project(p, []Tool{remote("a", `{"type":"object"}`)}); err == nil || !strings.Contains(err.Error(), "controls.policy") {
		t.Errorf("bad policy: %v", err)
	}
}

// Title, annotations and outputSchema come along as controls; what cannot
// be kept is noted, never fatal.
func TestProjectDescription(t *testing.T) {
	full := remote("read", `{"type":"object"}`)
	full.Title = "Read\tit"
	full.Annotations = json.RawMessage(`{"title":"ignored","readOnlyHint":true,"destructiveHint":"no","futureHint":true}`)
	full.OutputSchema = json.RawMessage(`{ "type": "object", "properties": {"text": {"type": "string"}} }`)
	annTitle := remote("annotated", `{"type":"object"}`)
	annTitle.Annotations = json.RawMessage(`{"title":"From annotations","openWorldHint":false}`)
	badOut := remote("badout", `{"type":"object"}`)
	badOut.OutputSchema = json.RawMessage(`{"type":"array"}`)
	plain := remote("plain", `{"type":"object"}`)
	cands, _, err := Project(projection(), []Tool{full, annTitle, badOut, plain})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ annotations, output, notes string }{
		{`{"title":"Read it","readOnlyHint":true}`, `{"type":"object","properties":{"text":{"type":"string"}}}`, "[]"},
		{`{"title":"From annotations","openWorldHint":false}`, "", "[]"},
		{"", "", `[outputSchema left out: output.schema: type must be "object"]`},
		{"", "", "[]"},
	}
	for i, c := range cands {
		m, err := object.ParseManifest(c.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		if m.Controls["annotations"] != want[i].annotations || m.Controls["output.schema"] != want[i].output || fmt.Sprint(c.Notes) != "["+strings.Trim(want[i].notes, "[]")+"]" {
			t.Errorf("%s: annotations %q output.schema %q notes %q", c.Name, m.Controls["annotations"], m.Controls["output.schema"], c.Notes)
		}
		if _, ok := m.Controls["annotations"]; ok != (want[i].annotations != "") {
			t.Errorf("%s: annotations control present=%v", c.Name, ok)
		}
	}
}
