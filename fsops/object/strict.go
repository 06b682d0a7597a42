package object

import (
	"encoding/json"
	"fmt"
)

// uintField decodes a non-negative JSON integer.
func uintField(raw json.RawMessage, name string) (uint64, error) {
	var n uint64
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' || json.Unmarshal(raw, &n) != nil {
		return 0, fmt.Errorf("%s must be a non-negative integer", name)
	}
	return n, nil
}
