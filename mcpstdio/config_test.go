package mcpstdio

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{"mcpServers":{"github":{"command":"npx","args":["-y","server-github"],"env":{"GITHUB_TOKEN":"t"}},"bare":{"command":"/bin/srv"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	gh := c.Servers["github"]
	if gh.Command != "npx" || fmt.Sprint(gh.Args) != "[-y server-github]" || gh.Env["GITHUB_TOKEN"] != "t" {
		t.Fatalf("%+v", gh)
	}
	if got := Environ(gh); fmt.Sprint(got) != "[GITHUB_TOKEN=t PATH=/usr/bin:/bin]" {
		t.Fatalf("Environ %v", got)
	}
	if got := Environ(ServerConfig{Env: map[string]string{"PATH": "/opt/bin"}}); fmt.Sprint(got) != "[PATH=/opt/bin]" {
		t.Fatalf("declared PATH: %v", got)
	}
	for in, want := range map[string]string{
		`[]`:                          "must be a JSON object",
		`{}`:                          `missing field "mcpServers"`,
		`{"mcpServers":{},"extra":1}`: `unknown field "extra"`,
		`{"mcpservers":{}}`:           `unknown field "mcpservers"`,
		`{"mcpServers":{"a":{"command":"x","Args":[]}}}`:           `mcpServers.a: unknown field "Args"`,
		`{"mcpServers":{"a":{"command":"x","url":"http://x"}}}`:    `unknown field "url"`,
		`{"mcpServers":{"a":{"args":[]}}}`:                         `missing field "command"`,
		`{"mcpServers":{"a":{"command":""}}}`:                      "non-empty",
		`{"mcpServers":{"a":{"command":"x\u001b"}}}`:               "control characters",
		`{"mcpServers":{"a":{"command":null}}}`:                    "command must be a string",
		`{"mcpServers":{"a":{"command":"x","args":"-y"}}}`:         "args must be an array",
		`{"mcpServers":{"a":{"command":"x","args":[1]}}}`:          "args must be an array",
		`{"mcpServers":{"a":{"command":"x","args":["\u0000"]}}}`:   "NUL",
		`{"mcpServers":{"a":{"command":"x","env":{"A=B":"1"}}}}`:   "not a valid variable name",
		`{"mcpServers":{"a":{"command":"x","env":{"A":1}}}}`:       "env.A must be a string",
		`{"mcpServers":{"a":{"command":"x"},"a":{"command":"y"}}}`: `duplicate field "a"`,
		`{"mcpServers":{}} x`:                                      "trailing data",
	} {
		_, err := ParseConfig([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mcp.json")
	os.WriteFile(p, []byte(`{"mcpServers":{}}`), 0o600)
	if _, data, err := ReadConfig(p); err != nil || string(data) != `{"mcpServers":{}}` {
		t.Fatalf("%q %v", data, err)
	}
	os.Symlink(p, filepath.Join(dir, "link.json"))
	if _, _, err := ReadConfig(filepath.Join(dir, "link.json")); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("symlink: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, make([]byte, MaxConfigSize+1), 0o600)
	if _, _, err := ReadConfig(big); err == nil {
		t.Fatal("oversized config accepted")
	}
}

func TestEntryDigest(t *testing.T) {
	digest := func(cfg string) string {
		t.Helper()
		c, err := ParseConfig([]byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		return EntryDigest(c.Servers["gh"])
	}
	base := digest(`{"mcpServers":{"gh":{"command":"npx","args":["-y","<pkg>"],"env":{"B":"2","A":"1"}}}}`)
	if got := string(canonicalEntry(ServerConfig{Command: "npx", Args: []string{"-y", "<pkg>"}, Env: map[string]string{"B": "2", "A": "1"}})); got != `{"command":"npx","args":["-y","<pkg>"],"env":{"A":"1","B":"2"}}` {
		t.Fatalf("canonical form %s", got)
	}
	// Whitespace, key order, a trailing newline and other servers do not
	// change it.
	for _, same := range []string{
		"{\n  \"mcpServers\": {\n    \"gh\": {\"env\": {\"A\": \"1\", \"B\": \"2\"}, \"args\": [\"-y\", \"<pkg>\"], \"command\": \"npx\"}\n  }\n}\n",
		`{"mcpServers":{"other":{"command":"x"},"gh":{"command":"npx","args":["-y","<pkg>"],"env":{"A":"1","B":"2"}}}}`,
	} {
		if d := digest(same); d != base {
			t.Errorf("%s: digest changed", same)
		}
	}
	// What starts does.
	for _, diff := range []string{
		`{"mcpServers":{"gh":{"command":"npx","args":["-y","<pkg>"],"env":{"A":"1","B":"3"}}}}`,
		`{"mcpServers":{"gh":{"command":"npx","args":["<pkg>","-y"],"env":{"A":"1","B":"2"}}}}`,
		`{"mcpServers":{"gh":{"command":"/usr/bin/npx","args":["-y","<pkg>"],"env":{"A":"1","B":"2"}}}}`,
		`{"mcpServers":{"gh":{"command":"npx","args":["-y","<pkg>"],"env":{"A":"1"}}}}`,
	} {
		if d := digest(diff); d == base {
			t.Errorf("%s: digest unchanged", diff)
		}
	}
	// An absent args or env is the empty one.
	if digest(`{"mcpServers":{"gh":{"command":"x"}}}`) != digest(`{"mcpServers":{"gh":{"command":"x","args":[],"env":{}}}}`) {
		t.Error("absent args/env differ from empty ones")
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"mcpServers":{"gh":{"command":"npx","args":["-y"],"env":{"K":"v"}}}}`))
	f.Add([]byte(`{"mcpServers":{}}`))
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x","env":{}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		for name, s := range c.Servers {
			if s.Command == "" {
				t.Fatalf("server %q accepted without a command", name)
			}
			for _, kv := range Environ(s) {
				if !strings.Contains(kv, "=") || strings.ContainsRune(kv, 0) {
					t.Fatalf("bad environment entry %q", kv)
				}
			}
			// The canonical entry is itself a valid entry with the same
			// digest: what the locator pins is exactly what starts.
			again, err := parseServer(canonicalEntry(s))
			if err != nil || EntryDigest(again) != EntryDigest(s) {
				t.Fatalf("canonical entry %s: %v", canonicalEntry(s), err)
			}
		}
	})
}
