package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// StrictObject decodes a JSON object strictly, for the JSON grammars ctx
// reads (object manifests, MCP configurations, locators): it must be one
// object and nothing after it, keys match exactly (encoding/json alone
// would match "Name" to "name" and let a duplicate key silently win), and
// a key may appear only once. The values are returned undecoded.
func StrictObject(data []byte) (map[string]json.RawMessage, error) {
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
		key := tok.(string) // object keys are always strings
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

// OnlyFields rejects the first key of m (in sorted order, so the error is
// stable) that is not in allowed, naming it with prefix.
func OnlyFields(m map[string]json.RawMessage, prefix string, allowed ...string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return fmt.Errorf("unknown field %q", prefix+k)
		}
	}
	return nil
}

// StringField decodes a JSON string; null and other types are errors.
func StringField(raw json.RawMessage, name string) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%s must be a string", name)
	}
	return s, nil
}
