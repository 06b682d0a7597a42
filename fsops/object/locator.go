package object

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"ctx/policy"
)

// Locator is the `mcp` control of an MCP-projected tool: where the server
// is configured and which remote tool the projected tool calls. The config
// is read at call time and never copied.
//
// The seed's locator has four fields (transport, config, server, tool);
// ctxmcp project adds a fifth, sha256, the digest of the selected server's
// entry in the config (mcpstdio.EntryDigest): the command, args and env the
// tool will start, not the file's bytes, so that reformatting the file or
// editing another server's entry does not break the tool. A locator
// without sha256 is valid and unchecked.
type Locator struct {
	Transport string // always "stdio"
	Config    string // absolute path of the MCP config file
	Server    string // key under "mcpServers"
	Tool      string // the remote tool name
	SHA256    string // lowercase hex digest of the server entry; "" when absent
}

// ParseLocator parses the `mcp` control strictly: a JSON object with exactly
// transport ("stdio"), config (absolute, clean, no control bytes), server and
// tool (object names), and optionally sha256 (64 lowercase hex digits). One
// trailing newline is allowed, as control files end in one.
func ParseLocator(data []byte) (Locator, error) {
	var l Locator
	m, err := policy.StrictObject(data)
	if err != nil {
		return l, fmt.Errorf("mcp locator: %v", err)
	}
	if err := policy.OnlyFields(m, "", "transport", "config", "server", "tool", "sha256"); err != nil {
		return l, fmt.Errorf("mcp locator: %v", err)
	}
	dst := []*string{&l.Transport, &l.Config, &l.Server, &l.Tool, &l.SHA256}
	for i, k := range []string{"transport", "config", "server", "tool", "sha256"} {
		raw, ok := m[k]
		if !ok {
			if k == "sha256" {
				continue // the seed's four-field form
			}
			return l, fmt.Errorf("mcp locator: missing field %q", k)
		}
		if *dst[i], err = policy.StringField(raw, k); err != nil {
			return l, fmt.Errorf("mcp locator: %v", err)
		}
	}
	_, hasSum := m["sha256"]
	switch {
	case l.Transport != "stdio":
		return l, fmt.Errorf("mcp locator: transport %q is not supported (only \"stdio\")", l.Transport)
	case !filepath.IsAbs(l.Config) || filepath.Clean(l.Config) != l.Config:
		return l, fmt.Errorf("mcp locator: config %q must be an absolute, clean path", l.Config)
	case hasControlByte(l.Config):
		return l, fmt.Errorf("mcp locator: config path contains a control character")
	case hasSum && !isLowerHex64(l.SHA256):
		return l, fmt.Errorf("mcp locator: sha256 must be 64 lowercase hex digits")
	}
	if err := policy.ValidName(l.Server); err != nil {
		return l, fmt.Errorf("mcp locator: server: %v", err)
	}
	if err := policy.ValidName(l.Tool); err != nil {
		return l, fmt.Errorf("mcp locator: tool: %v", err)
	}
	return l, nil
}

// JSON encodes the locator in its canonical one-line form, keys in a fixed
// order, sha256 only when set.
func (l Locator) JSON() string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	s := `{"transport":` + q(l.Transport) + `,"config":` + q(l.Config) + `,"server":` + q(l.Server) +
		`,"tool":` + q(l.Tool)
	if l.SHA256 != "" {
		s += `,"sha256":` + q(l.SHA256)
	}
	return s + "}"
}

// ReservedToolGroups are the name groups of ctx's builtin tools (fs.read,
// shell.exec, tsh.config, agent.update ...). An MCP server of one of these
// names would project SERVER.TOOL into the builtin group, where a projected
// fs.read would shadow the builtin one: ctxmcp refuses such servers.
var ReservedToolGroups = []string{"agent", "fs", "shell", "tsh"}

// IsReservedToolGroup reports whether name is one of ReservedToolGroups.
func IsReservedToolGroup(name string) bool {
	for _, g := range ReservedToolGroups {
		if name == g {
			return true
		}
	}
	return false
}

func isLowerHex64(s string) bool { return policy.IsLowerHex(s, 64) }

func hasControlByte(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}
