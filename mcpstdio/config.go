// Package mcpstdio speaks the Model Context Protocol over a child's stdio,
// both ways: a client that spawns a configured server to list and call its
// tools (ctxmcp list/project and MCP-projected tools), and a server that
// exposes ctx tools to an MCP client (ctxmcp serve).
//
// Wire format: newline-delimited JSON-RPC 2.0, one message per line, at
// most MaxFrame bytes per line.
package mcpstdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"ctx/fsops"
)

// MaxConfigSize bounds an MCP configuration file.
const MaxConfigSize = 1 << 20

// ServerConfig is one entry of "mcpServers".
type ServerConfig struct {
	Command string
	Args    []string
	Env     map[string]string
}

// Config is an MCP configuration file:
// {"mcpServers":{NAME:{"command":C,"args":[...],"env":{K:V}}}}.
type Config struct {
	Servers map[string]ServerConfig
}

// ReadConfig reads and parses the configuration at path (a regular file,
// final component not followed, at most 1 MiB). It also returns the bytes
// read, so callers can hash exactly what was parsed.
func ReadConfig(path string) (*Config, []byte, error) {
	data, err := fsops.ReadRegular(path, MaxConfigSize)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, data, nil
}

// ParseConfig parses a configuration strictly: unknown or duplicate fields
// at any level are errors, command must be a non-empty string without
// control characters, args strings without NUL, env string values without
// NUL and keys of the environment-name shape.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > MaxConfigSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxConfigSize)
	}
	top, err := jsonObject(data)
	if err != nil {
		return nil, err
	}
	if err := onlyKeys(top, "", "mcpServers"); err != nil {
		return nil, err
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return nil, fmt.Errorf("missing field \"mcpServers\"")
	}
	servers, err := jsonObject(raw)
	if err != nil {
		return nil, fmt.Errorf("mcpServers: %v", err)
	}
	c := &Config{Servers: make(map[string]ServerConfig, len(servers))}
	for _, name := range sortedKeys(servers) {
		s, err := parseServer(servers[name])
		if err != nil {
			return nil, fmt.Errorf("mcpServers.%s: %v", name, err)
		}
		c.Servers[name] = s
	}
	return c, nil
}

func parseServer(raw json.RawMessage) (ServerConfig, error) {
	var s ServerConfig
	m, err := jsonObject(raw)
	if err != nil {
		return s, err
	}
	if err := onlyKeys(m, "", "command", "args", "env"); err != nil {
		return s, err
	}
	c, ok := m["command"]
	if !ok {
		return s, fmt.Errorf("missing field \"command\"")
	}
	if s.Command, err = jsonString(c, "command"); err != nil {
		return s, err
	}
	if s.Command == "" || strings.IndexFunc(s.Command, isControl) >= 0 {
		return s, fmt.Errorf("command must be non-empty without control characters")
	}
	if a, ok := m["args"]; ok {
		if len(a) == 0 || a[0] != '[' || json.Unmarshal(a, &s.Args) != nil {
			return s, fmt.Errorf("args must be an array of strings")
		}
		for i, arg := range s.Args {
			if strings.IndexByte(arg, 0) >= 0 {
				return s, fmt.Errorf("args[%d] contains NUL", i)
			}
		}
	}
	if e, ok := m["env"]; ok {
		em, err := jsonObject(e)
		if err != nil {
			return s, fmt.Errorf("env: %v", err)
		}
		s.Env = make(map[string]string, len(em))
		for _, k := range sortedKeys(em) {
			if !validEnvName(k) {
				return s, fmt.Errorf("env: %q is not a valid variable name", k)
			}
			v, err := jsonString(em[k], "env."+k)
			if err != nil {
				return s, err
			}
			if strings.IndexByte(v, 0) >= 0 {
				return s, fmt.Errorf("env.%s contains NUL", k)
			}
			s.Env[k] = v
		}
	}
	return s, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// jsonObject decodes a JSON object keeping raw values, matching keys
// exactly and refusing duplicates (encoding/json would fold case and let
// the last duplicate win).
func jsonObject(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("must be a JSON object")
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not valid JSON: %v", err)
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("not valid JSON: %v", err)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("duplicate field %q", key)
		}
		out[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	return out, nil
}

func onlyKeys(m map[string]json.RawMessage, prefix string, allowed ...string) error {
	for _, k := range sortedKeys(m) {
		found := false
		for _, a := range allowed {
			found = found || k == a
		}
		if !found {
			return fmt.Errorf("unknown field %q", prefix+k)
		}
	}
	return nil
}

func jsonString(raw json.RawMessage, name string) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%s must be a string", name)
	}
	return s, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
