package schema

import (
	"encoding/json"
	"testing"
)

// FuzzCompileValidate compiles arbitrary schema documents and validates
// arbitrary values against those that compile: neither step may panic or
// loop, and a failure must carry a keyword.
func FuzzCompileValidate(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), []byte(`{"path":"x"}`))
	f.Add([]byte(`{"$defs":{"n":{"properties":{"k":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`), []byte(`{"k":{"k":{}}}`))
	f.Add([]byte(`{"anyOf":[{"const":1},{"enum":[[1],{"a":null}]}],"uniqueItems":true}`), []byte(`[1,1]`))
	f.Add([]byte(`{"items":[{"type":"string"}],"additionalItems":{"multipleOf":0.5}}`), []byte(`["a",1.5,2.25]`))
	f.Add([]byte(`{"if":{"minimum":3},"then":{"maximum":5},"else":{"not":{"type":"null"}}}`), []byte(`7`))
	f.Add([]byte(`{"patternProperties":{"^a":false},"propertyNames":{"pattern":"^[a-z]+$"}}`), []byte(`{"ab":1}`))
	f.Fuzz(func(t *testing.T, doc, value []byte) {
		s, err := Compile(doc)
		if err != nil {
			if !isCompileError(err) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		var v any
		if json.Unmarshal(value, &v) != nil {
			return
		}
		if err := s.Validate(v); err != nil {
			if ve, ok := err.(*ValidationError); !ok || ve.Keyword == "" {
				t.Fatalf("bad error %#v", err)
			}
		}
	})
}
