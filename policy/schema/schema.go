// Package schema checks JSON Schema documents and validates JSON values
// against them. It is pure (no I/O) and small on purpose: ctx validates every
// tool input against the tool's `schema` control on every call, so it avoids
// the package-init and allocation costs of a general-purpose library.
//
// Compile accepts draft-07 and 2020-12 style schemas and checks the structure
// of the keywords it supports:
//
//	type properties required additionalProperties patternProperties
//	propertyNames minProperties maxProperties dependentRequired
//	dependentSchemas dependencies items prefixItems additionalItems contains
//	minContains maxContains minItems maxItems uniqueItems enum const minimum
//	maximum exclusiveMinimum exclusiveMaximum multipleOf minLength maxLength
//	pattern allOf anyOf oneOf not if then else $ref $defs definitions
//
// and the annotations title, description, $schema, $id, $comment, format,
// default and examples (checked for shape, never enforced). Unknown keywords
// are ignored, as the specification allows. $ref must be a local reference:
// "#" or a JSON pointer "#/..." into the same document. Patterns use Go's
// RE2 syntax; an ECMA-only construct (lookaround, backreference) is a compile
// error rather than a silently different match. unevaluatedProperties and
// unevaluatedItems are not enforced.
//
// Validate returns the first failure with the JSON pointer of the value that
// failed, and allocates nothing on success for the common keywords.
package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Schema is a compiled schema, safe for concurrent use.
type Schema struct {
	root *node
}

// typeSet is a bit set of JSON types.
type typeSet uint8

const (
	typeNull typeSet = 1 << iota
	typeBoolean
	typeObject
	typeArray
	typeNumber
	typeString
	typeInteger
)

var typeNames = map[string]typeSet{
	"null": typeNull, "boolean": typeBoolean, "object": typeObject, "array": typeArray,
	"number": typeNumber, "string": typeString, "integer": typeInteger,
}

type patternSchema struct {
	re     *regexp.Regexp
	schema *node
}

// node is one compiled (sub)schema. Limits use -1 for "absent".
type node struct {
	always int8 // +1 the schema `true` (or an empty object), -1 `false`, 0 keywords decide

	types typeSet // 0 = any

	properties    map[string]*node
	patternProps  []patternSchema
	additional    *node // nil: any additional property allowed
	required      []string
	propertyNames *node
	minProps      int
	maxProps      int
	depRequired   map[string][]string
	depSchemas    map[string]*node

	prefixItems []*node
	items       *node // applies after prefixItems
	contains    *node
	minContains int
	maxContains int
	minItems    int
	maxItems    int
	uniqueItems bool

	enum     []any
	hasEnum  bool
	constVal any
	hasConst bool

	minimum, maximum       float64
	hasMinimum, hasMaximum bool
	exclMin, exclMax       float64
	hasExclMin, hasExclMax bool
	multipleOf             float64
	minLength, maxLength   int
	pattern                *regexp.Regexp
	allOf, anyOf, oneOf    []*node
	not, ifS, thenS, elseS *node
	ref                    *node
	refTarget              string // the pointer ref resolves to, for cycle checks
}

// CompileError reports a structural problem of a schema document, naming the
// keyword by its JSON pointer inside the document.
type CompileError struct {
	Pointer string // "#/properties/path/type"
	Msg     string
}

func (e *CompileError) Error() string { return "schema " + e.Pointer + ": " + e.Msg }

// Compile parses doc as JSON and compiles it. The document must be a JSON
// object or a boolean.
func Compile(doc []byte) (*Schema, error) {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, &CompileError{"#", "not valid JSON: " + err.Error()}
	}
	return CompileValue(root)
}

// CompileValue compiles a schema already decoded by encoding/json.
func CompileValue(root any) (*Schema, error) {
	c := &compiler{root: root, byPtr: map[string]*node{}}
	n, err := c.compile(root, "#")
	if err != nil {
		return nil, err
	}
	// Refs are resolved after the walk so that forward references and
	// recursion ("#" inside properties) work.
	for i := 0; i < len(c.pending); i++ {
		p := c.pending[i]
		target, ok := resolvePointer(c.root, p.ref)
		if !ok {
			return nil, &CompileError{p.at, fmt.Sprintf("$ref %q does not resolve inside this document", p.ref)}
		}
		tn, err := c.compile(target, p.ref)
		if err != nil {
			return nil, err
		}
		p.n.ref = tn
		p.n.refTarget = p.ref
	}
	if err := checkCycles(n); err != nil {
		return nil, err
	}
	return &Schema{root: n}, nil
}

type pendingRef struct {
	n   *node
	ref string
	at  string
}

type compiler struct {
	root    any
	byPtr   map[string]*node
	pending []pendingRef
}

func (c *compiler) fail(ptr, format string, args ...any) error {
	return &CompileError{ptr, fmt.Sprintf(format, args...)}
}

func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (c *compiler) compile(v any, ptr string) (*node, error) {
	if n, ok := c.byPtr[ptr]; ok {
		return n, nil
	}
	n := &node{minProps: -1, maxProps: -1, minItems: -1, maxItems: -1, minLength: -1, maxLength: -1, minContains: -1, maxContains: -1}
	c.byPtr[ptr] = n
	switch s := v.(type) {
	case bool:
		if s {
			n.always = 1
		} else {
			n.always = -1
		}
		return n, nil
	case map[string]any:
		if len(s) == 0 {
			n.always = 1
			return n, nil
		}
		return n, c.keywords(n, s, ptr)
	default:
		return nil, c.fail(ptr, "a schema must be a JSON object or a boolean, not %s", jsonKind(v))
	}
}

func (c *compiler) sub(v any, ptr string) (*node, error) { return c.compile(v, ptr) }

func (c *compiler) subList(v any, ptr string, nonEmpty bool) ([]*node, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, c.fail(ptr, "must be an array of schemas")
	}
	if nonEmpty && len(arr) == 0 {
		return nil, c.fail(ptr, "must not be empty")
	}
	out := make([]*node, len(arr))
	for i, e := range arr {
		n, err := c.sub(e, ptr+"/"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

func (c *compiler) subMap(v any, ptr string) (map[string]*node, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, c.fail(ptr, "must be an object of schemas")
	}
	out := make(map[string]*node, len(m))
	for _, k := range sortedKeys(m) {
		n, err := c.sub(m[k], ptr+"/"+escapeToken(k))
		if err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func nonNegInt(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

func uniqueStrings(v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	seen := make(map[string]bool, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok || seen[s] {
			return nil, false
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, true
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}
