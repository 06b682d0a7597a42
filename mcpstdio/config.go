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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"ctx/fsops"
	"ctx/policy"
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
	top, err := policy.StrictObject(data)
	if err != nil {
		return nil, err
	}
	if err := policy.OnlyFields(top, "", "mcpServers"); err != nil {
		return nil, err
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return nil, fmt.Errorf("missing field \"mcpServers\"")
	}
	servers, err := policy.StrictObject(raw)
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
	m, err := policy.StrictObject(raw)
	if err != nil {
		return s, err
	}
	if err := policy.OnlyFields(m, "", "command", "args", "env"); err != nil {
		return s, err
	}
	c, ok := m["command"]
	if !ok {
		return s, fmt.Errorf("missing field \"command\"")
	}
	if s.Command, err = policy.StringField(c, "command"); err != nil {
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
		em, err := policy.StrictObject(e)
		if err != nil {
			return s, fmt.Errorf("env: %v", err)
		}
		s.Env = make(map[string]string, len(em))
		for _, k := range sortedKeys(em) {
			if !validEnvName(k) {
				return s, fmt.Errorf("env: %q is not a valid variable name", k)
			}
			v, err := policy.StringField(em[k], "env."+k)
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

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EntryDigest is the lowercase hex SHA-256 that an `mcp` locator records
// for a server: the digest of the entry's canonical form, the compact JSON
// object {"command":C,"args":[...],"env":{...}} with the keys in that
// order, env's keys sorted, an absent args as [] and an absent env as {},
// and strings escaped as by encoding/json without HTML escaping. It covers
// exactly what the tool will start: reformatting the file, reordering keys
// or editing another server's entry leave it unchanged; a changed command,
// argument or variable changes it.
func EntryDigest(s ServerConfig) string {
	sum := sha256.Sum256(canonicalEntry(s))
	return hex.EncodeToString(sum[:])
}

func canonicalEntry(s ServerConfig) []byte {
	args := s.Args
	if args == nil {
		args = []string{}
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	str := func(v string) {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)       // a string always encodes
		b.Truncate(b.Len() - 1) // Encode's newline
	}
	b.WriteString(`{"command":`)
	str(s.Command)
	b.WriteString(`,"args":[`)
	for i, a := range args {
		if i > 0 {
			b.WriteByte(',')
		}
		str(a)
	}
	b.WriteString(`],"env":{`)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		str(k)
		b.WriteByte(':')
		str(s.Env[k])
	}
	b.WriteString("}}")
	return b.Bytes()
}
