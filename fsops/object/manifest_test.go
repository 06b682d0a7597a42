package object

import (
	"encoding/json"
	"strings"
	"testing"
)

const zeroSum = "0000000000000000000000000000000000000000000000000000000000000000"

// toolManifest returns a valid v2 tool manifest as a generic map that tests
// can modify before encoding.
func toolManifest() map[string]any {
	return map[string]any{
		"schema":        SchemaV2,
		"version":       "1.0.0",
		"compatibility": map[string]any{"cortexfs": ">=0.1.7, <0.2.0"},
		"class":         "tool",
		"name":          "example.echo",
		"executable":    map[string]any{"path": "bin/echo", "sha256": zeroSum},
		"controls": map[string]any{
			"description": "Echo text.",
			"schema":      `{"type":"object"}`,
			"cap":         "text",
			"policy":      "",
		},
	}
}

func agentManifest() map[string]any {
	return map[string]any{
		"schema":     SchemaV1,
		"class":      "agent",
		"name":       "reviewer",
		"executable": map[string]any{"path": "/bin/true", "sha256": zeroSum},
		"controls": map[string]any{
			"owner": "1000", "uid": "1000", "gid": "1000", "groups": "1000\n27\n",
			"label": "user_u:agent_r:reviewer_t:s0", "iso": "userns", "parent": "agent:architect",
			"life": "owned", "root": "/ctx/home/1000/agent/reviewer/root", "cwd": "/workspace",
			"env": "LANG=C.UTF-8\n", "path": "/ctx/tool\n/ctx/home/1000/tool\n",
			"mount": "/ctx\t/ctx\tro\trbind,nosuid,nodev\n", "model": "openai/gpt-5.6",
			"abi": "sdk-envelope-v1", "policy": "allow reviewer_t tool:fs.read execute\n",
			"perm": "r--", "window": "auto", "approval": "ask", "tools": "fs.read\nfs.list\n",
			"system.md": "You review.\n", "meta.json": `{"description":"x"}`,
		},
	}
}

func encode(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseManifestValid(t *testing.T) {
	m, err := ParseManifest(encode(t, toolManifest()))
	if err != nil {
		t.Fatal(err)
	}
	if m.Class != "tool" || m.Name != "example.echo" || m.Version != "1.0.0" || m.Controls["cap"] != "text" {
		t.Fatalf("parsed %+v", m)
	}
	if _, err := ParseManifest(encode(t, agentManifest())); err != nil {
		t.Fatal(err)
	}
	// Encode round-trips.
	again, err := ParseManifest(m.Encode())
	if err != nil {
		t.Fatalf("%v\n%s", err, m.Encode())
	}
	if string(again.Encode()) != string(m.Encode()) {
		t.Fatalf("round trip differs:\n%s\n%s", again.Encode(), m.Encode())
	}
}

func TestParseManifestInvalid(t *testing.T) {
	type mod func(m map[string]any)
	ctl := func(m map[string]any) map[string]any { return m["controls"].(map[string]any) }
	tests := []struct {
		name string
		base func() map[string]any
		mod  mod
		want string
	}{
		{"unknown top", toolManifest, func(m map[string]any) { m["extra"] = 1 }, `unknown field "extra"`},
		{"case-folded key", toolManifest, func(m map[string]any) { m["Name"] = m["name"]; delete(m, "name") }, `unknown field "Name"`},
		{"bad schema", toolManifest, func(m map[string]any) { m["schema"] = "cortexfs.object/v3" }, "unsupported object manifest schema"},
		{"v2 without version", toolManifest, func(m map[string]any) { delete(m, "version") }, `missing field "version"`},
		{"v2 without compat", toolManifest, func(m map[string]any) { delete(m, "compatibility") }, `missing field "compatibility"`},
		{"bad semver", toolManifest, func(m map[string]any) { m["version"] = "1.0" }, "version:"},
		{"version null", toolManifest, func(m map[string]any) { m["version"] = nil }, "version must be a string"},
		{"compat extra", toolManifest, func(m map[string]any) { m["compatibility"].(map[string]any)["ctx"] = "1" }, `unknown field "compatibility.ctx"`},
		{"compat mismatch", toolManifest, func(m map[string]any) { m["compatibility"] = map[string]any{"cortexfs": "^0.2"} }, "does not match this CortexFS version 0.1.7"},
		{"compat bad req", toolManifest, func(m map[string]any) { m["compatibility"] = map[string]any{"cortexfs": ">=x"} }, "compatibility.cortexfs:"},
		{"v1 with version", agentManifest, func(m map[string]any) { m["version"] = nil }, "version: not allowed"},
		{"v1 with compat", agentManifest, func(m map[string]any) { m["compatibility"] = map[string]any{} }, "compatibility: not allowed"},
		{"model class", toolManifest, func(m map[string]any) { m["class"] = "model" }, "model installation is not supported"},
		{"bad class", toolManifest, func(m map[string]any) { m["class"] = "Tool" }, `class "Tool"`},
		{"bad name", toolManifest, func(m map[string]any) { m["name"] = "x.sock" }, "name: invalid name"},
		{"empty path", toolManifest, func(m map[string]any) { m["executable"].(map[string]any)["path"] = "" }, "executable.path"},
		{"short sha", toolManifest, func(m map[string]any) { m["executable"].(map[string]any)["sha256"] = "abc" }, "64 hex digits"},
		{"exec extra", toolManifest, func(m map[string]any) { m["executable"].(map[string]any)["args"] = []string{} }, `unknown field "executable.args"`},
		{"runtime control", toolManifest, func(m map[string]any) { ctl(m)["status"] = "idle" }, "controls.status: unknown or runtime-owned"},
		{"name control", toolManifest, func(m map[string]any) { ctl(m)["name"] = "x" }, "controls.name: unknown or runtime-owned"},
		{"missing required", toolManifest, func(m map[string]any) { delete(ctl(m), "cap") }, `missing required control "controls.cap"`},
		{"control char", toolManifest, func(m map[string]any) { ctl(m)["description"] = "a\x1b[2Jb" }, "control character"},
		{"non-string control", toolManifest, func(m map[string]any) { ctl(m)["cap"] = 3 }, "controls.cap must be a string"},
		{"schema not object", toolManifest, func(m map[string]any) { ctl(m)["schema"] = "true" }, "controls.schema: must be a JSON object"},
		{"schema invalid", toolManifest, func(m map[string]any) { ctl(m)["schema"] = `{"type":"float"}` }, `controls.schema: schema #/type: unknown type "float"`},
		{"program invalid", toolManifest, func(m map[string]any) { ctl(m)["program"] = `{"minLength":-1}` }, "controls.program:"},
		{"policy bad", toolManifest, func(m map[string]any) { ctl(m)["policy"] = "# comment\n" }, "controls.policy: policy: line 1: expected 4 fields"},
		{"policy perm", toolManifest, func(m map[string]any) { ctl(m)["policy"] = "allow a_t tool:x read\n" }, `unknown permission "read" for class tool`},
		{"policy glob", toolManifest, func(m map[string]any) { ctl(m)["policy"] = "allow a_t agent:* create\n" }, `agent name "*": must start with a letter or digit`},
		{"mcp bad", toolManifest, func(m map[string]any) { ctl(m)["mcp"] = `{"transport":"stdio"}` }, "controls.mcp: mcp locator: missing field"},
		{"cap blank", toolManifest, func(m map[string]any) { ctl(m)["cap"] = "" }, "controls.cap: empty value"},
		{"agent perm", agentManifest, func(m map[string]any) { ctl(m)["perm"] = "rw" }, "controls.perm"},
		{"agent window", agentManifest, func(m map[string]any) { ctl(m)["window"] = "012" }, "controls.window"},
		{"agent window zero", agentManifest, func(m map[string]any) { ctl(m)["window"] = "0" }, `"0" is not auto or a positive decimal number`},
		{"agent tools tsh", agentManifest, func(m map[string]any) { ctl(m)["tools"] = "tsh\n" }, "tsh is reserved"},
		{"agent tools dup", agentManifest, func(m map[string]any) { ctl(m)["tools"] = "a\na\n" }, "a already on line 1"},
		{"agent tools blank", agentManifest, func(m map[string]any) { ctl(m)["tools"] = "a\n\nb\n" }, "line 2"},
		{"agent abi", agentManifest, func(m map[string]any) { ctl(m)["abi"] = "argv-v2" }, "controls.abi"},
		{"agent label", agentManifest, func(m map[string]any) { ctl(m)["label"] = "a:b:c" }, "controls.label"},
		{"agent mount", agentManifest, func(m map[string]any) { ctl(m)["mount"] = "/a\t/b\tro\tbind,rbind\n" }, "exclude each other"},
		{"agent mount opt", agentManifest, func(m map[string]any) { ctl(m)["mount"] = "/a\t/b\tro\tsuid\n" }, "unknown option"},
		{"agent env ctx", agentManifest, func(m map[string]any) { ctl(m)["env"] = "CTX_AGENT=x\n" }, "CTX_*"},
		{"agent env dup", agentManifest, func(m map[string]any) { ctl(m)["env"] = "A=1\nA=2\n" }, "key A already set on line 1"},
		{"agent root", agentManifest, func(m map[string]any) { ctl(m)["root"] = "rel" }, "absolute"},
		{"agent model", agentManifest, func(m map[string]any) { ctl(m)["model"] = "gpt" }, "controls.model"},
		{"agent uid", agentManifest, func(m map[string]any) { ctl(m)["uid"] = "-1" }, "controls.uid"},
		{"agent parent", agentManifest, func(m map[string]any) { ctl(m)["parent"] = "session:x" }, "controls.parent"},
		{"agent meta", agentManifest, func(m map[string]any) { ctl(m)["meta.json"] = "[]" }, "JSON object"},
		{"agent missing", agentManifest, func(m map[string]any) { delete(ctl(m), "abi") }, `"controls.abi"`},
		{"agent tool control", agentManifest, func(m map[string]any) { ctl(m)["cap"] = "x" }, "controls.cap: unknown"},
	}
	for _, tc := range tests {
		m := tc.base()
		tc.mod(m)
		_, err := ParseManifest(encode(t, m))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestParseManifestSyntax(t *testing.T) {
	for in, want := range map[string]string{
		`[]`:                             "must be a JSON object",
		`{"schema":"cortexfs.object/v2"`: "not valid JSON",
		`{"schema":"cortexfs.object/v1","schema":"cortexfs.object/v1"}`: `duplicate field "schema"`,
		`{"schema":"cortexfs.object/v1"} {}`:                            "trailing data",
		`{"class":"tool"}`:                                              `missing field "schema"`,
		"schema: cortexfs.object/v2\n":                                  "not valid JSON",
	} {
		_, err := ParseManifest([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

func TestParseLocator(t *testing.T) {
	good := `{"transport":"stdio","config":"/workspace/.mcp.json","server":"github","tool":"search_issues","sha256":"` + strings.Repeat("ab", 32) + `"}`
	l, err := ParseLocator([]byte(good + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l.JSON() != good {
		t.Fatalf("JSON() = %s", l.JSON())
	}
	// The seed's four-field locator (no sha256) is valid and unchecked.
	seed := `{"transport":"stdio","config":"/workspace/.mcp.json","server":"github","tool":"search_issues"}`
	if l, err := ParseLocator([]byte(seed + "\n")); err != nil || l.SHA256 != "" || l.JSON() != seed {
		t.Fatalf("seed locator: %v %+v", err, l)
	}
	for _, bad := range []string{
		`{"transport":"http","config":"/a","server":"s","tool":"t","sha256":"` + strings.Repeat("ab", 32) + `"}`,
		`{"transport":"stdio","config":"a.json","server":"s","tool":"t","sha256":"` + strings.Repeat("ab", 32) + `"}`,
		`{"transport":"stdio","config":"/a/../b","server":"s","tool":"t","sha256":"` + strings.Repeat("ab", 32) + `"}`,
		`{"transport":"stdio","config":"/a","server":"s/x","tool":"t","sha256":"` + strings.Repeat("ab", 32) + `"}`,
		`{"transport":"stdio","config":"/a","server":"s","tool":".t","sha256":"` + strings.Repeat("ab", 32) + `"}`,
		`{"transport":"stdio","config":"/a","server":"s","tool":"t","sha256":"` + strings.Repeat("AB", 32) + `"}`,
		`{"transport":"stdio","config":"/a","server":"s","tool":"t","sha256":""}`,
		`{"transport":"stdio","config":"/a","server":"s","tool":"t","sha256":"` + strings.Repeat("ab", 32) + `","x":1}`,
		`{"transport":"stdio","config":"/a","server":"s","tool":"t","sha256":null}`,
	} {
		if _, err := ParseLocator([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func FuzzParseManifest(f *testing.F) {
	b, _ := json.Marshal(toolManifest())
	f.Add(b)
	b, _ = json.Marshal(agentManifest())
	f.Add(b)
	f.Add([]byte(`{"schema":"cortexfs.object/v1","class":"tool","name":"a","executable":{"path":"x","sha256":"` + zeroSum + `"},"controls":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		// Whatever parses must survive its own encoding unchanged.
		again, err := ParseManifest(m.Encode())
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, m.Encode())
		}
		if string(again.Encode()) != string(m.Encode()) {
			t.Fatalf("round trip differs")
		}
	})
}

func FuzzParseLocator(f *testing.F) {
	f.Add([]byte(`{"transport":"stdio","config":"/w/.mcp.json","server":"gh","tool":"t","sha256":"` + strings.Repeat("0f", 32) + `"}`))
	f.Add([]byte(`{"transport":"stdio"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLocator(data)
		if err != nil {
			return
		}
		again, err := ParseLocator([]byte(l.JSON()))
		if err != nil || again != l {
			t.Fatalf("round trip: %v %+v %+v", err, again, l)
		}
	})
}
