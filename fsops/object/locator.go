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
// is read at call time and must still hash to SHA256; it is never copied.
type Locator struct {
	Transport string // always "stdio"
	Config    string // absolute path of the MCP config file
	Server    string // key under "mcpServers"
	Tool      string // the remote tool name
	SHA256    string // lowercase hex SHA-256 of the config file's bytes
}

// ParseLocator parses the `mcp` control strictly: a JSON object with exactly
// transport ("stdio"), config (absolute, clean, no control bytes), server and
// tool (object names) and sha256 (64 lowercase hex digits). One trailing
// newline is allowed, as control files end in one.
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
			return l, fmt.Errorf("mcp locator: missing field %q", k)
		}
		if *dst[i], err = policy.StringField(raw, k); err != nil {
			return l, fmt.Errorf("mcp locator: %v", err)
		}
	}
	switch {
	case l.Transport != "stdio":
		return l, fmt.Errorf("mcp locator: transport %q is not supported (only \"stdio\")", l.Transport)
	case !filepath.IsAbs(l.Config) || filepath.Clean(l.Config) != l.Config:
		return l, fmt.Errorf("mcp locator: config %q must be an absolute, clean path", l.Config)
	case hasControlByte(l.Config):
		return l, fmt.Errorf("mcp locator: config path contains a control character")
	case !isLowerHex64(l.SHA256):
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
// order.
func (l Locator) JSON() string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return `{"transport":` + q(l.Transport) + `,"config":` + q(l.Config) + `,"server":` + q(l.Server) +
		`,"tool":` + q(l.Tool) + `,"sha256":` + q(l.SHA256) + `}`
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func hasControlByte(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}
