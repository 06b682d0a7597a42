package toolrun

import "testing"

// jsonObject keeps exactly one JSON object, compacted, and nothing else.
func TestJSONObject(t *testing.T) {
	for in, want := range map[string]string{
		"{\n  \"type\": \"object\"\n}\n": `{"type":"object"}`,
		`{}`:                             `{}`,
		` {"a":[1, 2]} `:                 `{"a":[1,2]}`,
		`[]`:                             "",
		`null`:                           "",
		`"s"`:                            "",
		`1`:                              "",
		``:                               "",
		`{`:                              "",
		`{} {}`:                          "",
		`{"a":}`:                         "",
	} {
		if got := string(jsonObject([]byte(in))); got != want {
			t.Errorf("jsonObject(%q) = %q, want %q", in, got, want)
		}
	}
}
