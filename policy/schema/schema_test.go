package schema

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func mustCompile(t testing.TB, doc string) *Schema {
	t.Helper()
	s, err := Compile([]byte(doc))
	if err != nil {
		t.Fatalf("Compile(%s): %v", doc, err)
	}
	return s
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		doc, want string
	}{
		{`[]`, "must be a JSON object or a boolean"},
		{`"x"`, "must be a JSON object or a boolean"},
		{`{`, "not valid JSON"},
		{`{"type":"float"}`, `#/type: unknown type "float"`},
		{`{"type":[]}`, "must not be an empty array"},
		{`{"type":["string","string"]}`, "listed twice"},
		{`{"type":7}`, "type name"},
		{`{"properties":[]}`, "#/properties: must be an object of schemas"},
		{`{"properties":{"a":3}}`, "#/properties/a: a schema must be"},
		{`{"required":"a"}`, "unique strings"},
		{`{"required":["a","a"]}`, "unique strings"},
		{`{"minLength":-1}`, "non-negative integer"},
		{`{"maxItems":1.5}`, "non-negative integer"},
		{`{"minimum":"1"}`, "must be a number"},
		{`{"minimum":5,"maximum":1}`, "greater than maximum"},
		{`{"multipleOf":0}`, "greater than 0"},
		{`{"pattern":"(?=x)"}`, "not supported (RE2 syntax)"},
		{`{"pattern":5}`, "must be a string"},
		{`{"patternProperties":{"(":{}}}`, "not supported"},
		{`{"anyOf":[]}`, "must not be empty"},
		{`{"allOf":{}}`, "array of schemas"},
		{`{"uniqueItems":"yes"}`, "boolean"},
		{`{"enum":"a"}`, "must be an array"},
		{`{"$ref":"other.json#/a"}`, "only local references"},
		{`{"$ref":"#/definitions/missing"}`, "does not resolve"},
		{`{"$ref":"#"}`, "circular $ref"},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, "circular $ref"},
		{`{"title":3}`, "#/title: must be a string"},
		{`{"description":false}`, "must be a string"},
		{`{"examples":{}}`, "must be an array"},
		{`{"exclusiveMinimum":true}`, "needs a numeric"},
		{`{"dependentRequired":{"a":[1]}}`, "unique strings"},
		{`{"$defs":{"x":1}}`, "#/$defs/x"},
		{`{"properties":{"a/b":{"type":"nope"}}}`, "#/properties/a~1b/type"},
	}
	for _, tc := range tests {
		_, err := Compile([]byte(tc.doc))
		if err == nil {
			t.Errorf("Compile(%s) = nil, want error containing %q", tc.doc, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !isCompileError(err) {
			t.Errorf("Compile(%s) = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestCompileAccepts(t *testing.T) {
	for _, doc := range []string{
		`true`, `false`, `{}`,
		`{"unknownKeyword":{"$ref":"nowhere"},"x-vendor":1}`,
		`{"$ref":"#/properties/a","properties":{"a":{"type":"string"}}}`,
		`{"type":"object","properties":{"child":{"$ref":"#"}}}`,
		`{"allOf":[{"properties":{"x":{"$ref":"#"}}}]}`,
		`{"items":[{"type":"string"}],"additionalItems":false}`,
		`{"exclusiveMaximum":true,"maximum":3}`,
		`{"$defs":{"a b":{"type":"string"}},"$ref":"#/$defs/a%20b"}`,
		`{"format":"uri","default":null,"examples":[1],"readOnly":true}`,
	} {
		if _, err := Compile([]byte(doc)); err != nil {
			t.Errorf("Compile(%s): %v", doc, err)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		schema, value string
		ptr, keyword  string // empty keyword: valid
	}{
		{`{"type":"object"}`, `{}`, "", ""},
		{`{"type":"object"}`, `[]`, "", "type"},
		{`{"type":"integer"}`, `1.0`, "", ""},
		{`{"type":"integer"}`, `1.5`, "", "type"},
		{`{"type":["string","null"]}`, `null`, "", ""},
		{`{"type":"number"}`, `"1"`, "", "type"},
		{`{"required":["path"]}`, `{"x":1}`, "", "required"},
		{`{"properties":{"a":{"type":"string"}}}`, `{"a":1}`, "/a", "type"},
		{`{"properties":{"a":{"type":"string"}},"additionalProperties":false}`, `{"a":"x","b":1}`, "/b", "additionalProperties"},
		{`{"additionalProperties":{"type":"number"}}`, `{"b":"x"}`, "/b", "type"},
		{`{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`, `{"x-a":"s"}`, "", ""},
		{`{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`, `{"x-a":1}`, "/x-a", "type"},
		{`{"propertyNames":{"maxLength":2}}`, `{"abc":1}`, "/abc", "propertyNames"},
		{`{"minProperties":1}`, `{}`, "", "minProperties"},
		{`{"maxProperties":1}`, `{"a":1,"b":2}`, "", "maxProperties"},
		{`{"dependentRequired":{"a":["b"]}}`, `{"a":1}`, "", "dependentRequired"},
		{`{"dependencies":{"a":["b"]}}`, `{"a":1,"b":2}`, "", ""},
		{`{"dependencies":{"a":{"required":["c"]}}}`, `{"a":1}`, "", "required"},
		{`{"items":{"type":"string"}}`, `["a",2]`, "/1", "type"},
		{`{"prefixItems":[{"type":"string"}],"items":false}`, `["a",2]`, "/1", "false"},
		{`{"items":[{"type":"string"}],"additionalItems":false}`, `["a"]`, "", ""},
		{`{"items":[{"type":"string"}],"additionalItems":false}`, `["a","b"]`, "/1", "false"},
		{`{"minItems":2}`, `[1]`, "", "minItems"},
		{`{"maxItems":1}`, `[1,2]`, "", "maxItems"},
		{`{"uniqueItems":true}`, `[1,"1",1.0]`, "", "uniqueItems"},
		{`{"uniqueItems":true}`, `[{"a":1},{"a":2},{"a":1}]`, "", "uniqueItems"},
		{`{"uniqueItems":true}`, `[{"a":1},{"a":2}]`, "", ""},
		{`{"contains":{"type":"string"}}`, `[1,2]`, "", "contains"},
		{`{"contains":{"type":"string"},"maxContains":1}`, `["a","b"]`, "", "maxContains"},
		{`{"enum":["a",1,{"k":[true]}]}`, `{"k":[true]}`, "", ""},
		{`{"enum":["a",1]}`, `"b"`, "", "enum"},
		{`{"const":2}`, `2.0`, "", ""},
		{`{"const":"x"}`, `"y"`, "", "const"},
		{`{"minimum":1}`, `0`, "", "minimum"},
		{`{"maximum":1}`, `2`, "", "maximum"},
		{`{"exclusiveMinimum":1}`, `1`, "", "exclusiveMinimum"},
		{`{"exclusiveMaximum":1}`, `1`, "", "exclusiveMaximum"},
		{`{"minimum":1,"exclusiveMinimum":true}`, `1`, "", "exclusiveMinimum"},
		{`{"multipleOf":0.1}`, `0.3`, "", ""},
		{`{"multipleOf":2}`, `3`, "", "multipleOf"},
		{`{"minLength":2}`, `"é"`, "", "minLength"},
		{`{"maxLength":1}`, `"é"`, "", ""},
		{`{"pattern":"^a+$"}`, `"aab"`, "", "pattern"},
		{`{"pattern":"b"}`, `"abc"`, "", ""},
		{`{"allOf":[{"type":"number"},{"minimum":3}]}`, `2`, "", "minimum"},
		{`{"anyOf":[{"type":"string"},{"type":"number"}]}`, `true`, "", "anyOf"},
		{`{"oneOf":[{"type":"number"},{"type":"integer"}]}`, `1`, "", "oneOf"},
		{`{"oneOf":[{"type":"number"},{"type":"integer"}]}`, `1.5`, "", ""},
		{`{"not":{"type":"null"}}`, `null`, "", "not"},
		{`{"if":{"type":"string"},"then":{"minLength":2},"else":{"type":"number"}}`, `"a"`, "", "minLength"},
		{`{"if":{"type":"string"},"then":{"minLength":2},"else":{"type":"number"}}`, `true`, "", "type"},
		{`false`, `1`, "", "false"},
		{`{"properties":{"a/b":{"properties":{"c~d":{"type":"string"}}}}}`, `{"a/b":{"c~d":1}}`, "/a~1b/c~0d", "type"},
		{`{"type":"object","properties":{"kid":{"$ref":"#"}},"additionalProperties":false}`, `{"kid":{"kid":{"bad":1}}}`, "/kid/kid/bad", "additionalProperties"},
	}
	for _, tc := range tests {
		s := mustCompile(t, tc.schema)
		var v any
		if err := json.Unmarshal([]byte(tc.value), &v); err != nil {
			t.Fatal(err)
		}
		err := s.Validate(v)
		if tc.keyword == "" {
			if err != nil {
				t.Errorf("%s on %s: %v, want valid", tc.schema, tc.value, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s on %s: %v, want %s failure", tc.schema, tc.value, err, tc.keyword)
			continue
		}
		if ve.Keyword != tc.keyword || ve.Pointer != tc.ptr {
			t.Errorf("%s on %s: keyword %q at %q (%v), want %q at %q", tc.schema, tc.value, ve.Keyword, ve.Pointer, ve, tc.keyword, tc.ptr)
		}
	}
}

// The first failure reported must not depend on map iteration order.
func TestValidateDeterministic(t *testing.T) {
	s := mustCompile(t, `{"additionalProperties":false}`)
	v := map[string]any{}
	for _, k := range []string{"m", "c", "x", "a", "q", "b"} {
		v[k] = 1
	}
	for i := 0; i < 50; i++ {
		err := s.Validate(v).(*ValidationError)
		if err.Pointer != "/a" {
			t.Fatalf("first failure at %q, want /a", err.Pointer)
		}
	}
}

func TestValidationErrorText(t *testing.T) {
	s := mustCompile(t, `{"properties":{"path":{"type":"string"}}}`)
	err := s.ValidateJSON([]byte(`{"path":3}`))
	if got, want := err.Error(), "#/path: expected string, got integer"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
}

// Schemas of real MCP servers (draft-07, from the npm servers) and of the
// ctx built-in tools (2020-12).
func TestRealServerSchemas(t *testing.T) {
	raw, err := os.ReadFile("testdata/servers.json")
	if err != nil {
		t.Fatal(err)
	}
	var docs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatal(err)
	}
	cases := map[string][2][]string{ // valid inputs, invalid inputs
		"filesystem.read_text_file": {{`{"path":"/x"}`, `{"path":"/x","head":3}`}, {`{}`, `{"path":1}`, `{"path":"/x","other":1}`}},
		"memory.create_entities":    {{`{"entities":[{"name":"a","entityType":"t","observations":["o"]}]}`}, {`{"entities":[{"name":"a"}]}`, `{"entities":{}}`}},
		"everything.get-sum":        {{`{"a":1,"b":2.5}`}, {`{"a":1}`, `{"a":"1","b":2}`}},
		"sequentialthinking":        {{`{"thought":"t","nextThoughtNeeded":true,"thoughtNumber":1,"totalThoughts":3}`}, {`{"thought":"t","nextThoughtNeeded":true,"thoughtNumber":0,"totalThoughts":3}`}},
		"fs.list":                   {{`{}`, `{"path":".","max_entries":256}`}, {`{"max_entries":257}`, `{"path":""}`, `{"max_entries":1.5}`}},
		"gosdk.greet":               {{`{"name":"x"}`}, {`{}`}},
		"zod.refs":                  {{`{"second":{"x":"a"},"tree":{"kids":[{"kids":[]}]}}`}, {`{"second":{}}`, `{"tree":{"kids":[{"kids":3}]}}`}},
	}
	for name, doc := range docs {
		s, err := Compile(doc)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		c, ok := cases[name]
		if !ok {
			t.Errorf("%s: no cases", name)
		}
		for _, in := range c[0] {
			if err := s.ValidateJSON([]byte(in)); err != nil {
				t.Errorf("%s: %s: %v", name, in, err)
			}
		}
		for _, in := range c[1] {
			if err := s.ValidateJSON([]byte(in)); err == nil {
				t.Errorf("%s: %s accepted", name, in)
			}
		}
	}
}

// A pathological uniqueItems array of scalars must stay linear.
func TestUniqueItemsLinear(t *testing.T) {
	s := mustCompile(t, `{"uniqueItems":true}`)
	a := make([]any, 200000)
	for i := range a {
		a[i] = float64(i)
	}
	// Quadratic comparison would take hours here; the map makes it instant.
	if err := s.Validate(a); err != nil {
		t.Fatal(err)
	}
	a = append(a, float64(7))
	if err := s.Validate(a); err == nil || !strings.Contains(err.Error(), "items 7 and 200000 are equal") {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestValidateAcceptsNumbersOfGoTypes(t *testing.T) {
	s := mustCompile(t, `{"type":"integer","minimum":2}`)
	for _, v := range []any{2, int64(3), json.Number("4")} {
		if err := s.Validate(v); err != nil {
			t.Errorf("%T %v: %v", v, v, err)
		}
	}
	if s.Validate(json.Number("1")) == nil {
		t.Error("json.Number 1 accepted")
	}
}

// isCompileError reports whether err came from Compile.
func isCompileError(err error) bool {
	var ce *CompileError
	return errors.As(err, &ce)
}

// ValidateJSON decodes data and validates it: the tests' way in.
func (s *Schema) ValidateJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return &ValidationError{Keyword: "json", Msg: "not valid JSON: " + err.Error()}
	}
	return s.Validate(v)
}
