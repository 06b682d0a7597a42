package object

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// fields decodes a JSON object strictly: it must be an object, keys are
// matched exactly (encoding/json alone would match "Name" to "name" and let
// a duplicate key silently win), and a key may appear only once. The values
// are returned undecoded.
func fields(data []byte) (map[string]json.RawMessage, error) {
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

// onlyFields rejects any key of m that is not in allowed.
func onlyFields(m map[string]json.RawMessage, prefix string, allowed ...string) error {
	for k := range m {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("unknown field %q", prefix+k)
		}
	}
	return nil
}

// stringField decodes a JSON string; null and other types are errors.
func stringField(raw json.RawMessage, name string) (string, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%s must be a string", name)
	}
	return s, nil
}

// uintField decodes a non-negative JSON integer.
func uintField(raw json.RawMessage, name string) (uint64, error) {
	var n uint64
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' || json.Unmarshal(raw, &n) != nil {
		return 0, fmt.Errorf("%s must be a non-negative integer", name)
	}
	return n, nil
}
