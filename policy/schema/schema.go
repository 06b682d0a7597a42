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
	"errors"
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

// keywords compiles the keywords of an object schema in sorted order, so the
// first structural error reported is deterministic.
func (c *compiler) keywords(n *node, s map[string]any, ptr string) error {
	var err error
	for _, k := range sortedKeys(s) {
		v := s[k]
		at := ptr + "/" + escapeToken(k)
		switch k {
		case "type":
			n.types, err = c.typeKeyword(v, at)
		case "properties":
			n.properties, err = c.subMap(v, at)
		case "patternProperties":
			m, ok := v.(map[string]any)
			if !ok {
				return c.fail(at, "must be an object of schemas")
			}
			for _, pat := range sortedKeys(m) {
				re, rerr := regexp.Compile(pat)
				if rerr != nil {
					return c.fail(at, "pattern %q is not supported (RE2 syntax): %v", pat, rerr)
				}
				sn, serr := c.sub(m[pat], at+"/"+escapeToken(pat))
				if serr != nil {
					return serr
				}
				n.patternProps = append(n.patternProps, patternSchema{re, sn})
			}
		case "additionalProperties":
			n.additional, err = c.sub(v, at)
		case "propertyNames":
			n.propertyNames, err = c.sub(v, at)
		case "required":
			var ok bool
			if n.required, ok = uniqueStrings(v); !ok {
				return c.fail(at, "must be an array of unique strings")
			}
		case "minProperties", "maxProperties", "minItems", "maxItems", "minLength", "maxLength", "minContains", "maxContains":
			i, ok := nonNegInt(v)
			if !ok {
				return c.fail(at, "must be a non-negative integer")
			}
			*n.limit(k) = i
		case "dependentRequired":
			n.depRequired, err = c.depRequired(v, at)
		case "dependentSchemas":
			n.depSchemas, err = c.subMap(v, at)
		case "dependencies":
			err = c.dependencies(n, v, at)
		case "prefixItems":
			n.prefixItems, err = c.subList(v, at, true)
		case "items":
			if _, isArr := v.([]any); isArr {
				// draft-07 tuple form: the same as 2020-12 prefixItems, with
				// additionalItems applying to the rest.
				n.prefixItems, err = c.subList(v, at, false)
				if err == nil {
					if ai, ok := s["additionalItems"]; ok {
						n.items, err = c.sub(ai, ptr+"/additionalItems")
					}
				}
			} else {
				n.items, err = c.sub(v, at)
			}
		case "additionalItems":
			// Only meaningful with the tuple form of items; compiled there.
			_, err = c.sub(v, at)
		case "contains":
			n.contains, err = c.sub(v, at)
		case "uniqueItems":
			b, ok := v.(bool)
			if !ok {
				return c.fail(at, "must be a boolean")
			}
			n.uniqueItems = b
		case "enum":
			arr, ok := v.([]any)
			if !ok {
				return c.fail(at, "must be an array")
			}
			n.enum, n.hasEnum = arr, true
		case "const":
			n.constVal, n.hasConst = v, true
		case "minimum", "maximum":
			f, ok := v.(float64)
			if !ok {
				return c.fail(at, "must be a number")
			}
			if k == "minimum" {
				n.minimum, n.hasMinimum = f, true
			} else {
				n.maximum, n.hasMaximum = f, true
			}
		case "exclusiveMinimum", "exclusiveMaximum":
			err = c.exclusive(n, s, k, v, at)
		case "multipleOf":
			f, ok := v.(float64)
			if !ok || f <= 0 {
				return c.fail(at, "must be a number greater than 0")
			}
			n.multipleOf = f
		case "pattern":
			p, ok := v.(string)
			if !ok {
				return c.fail(at, "must be a string")
			}
			re, rerr := regexp.Compile(p)
			if rerr != nil {
				return c.fail(at, "pattern %q is not supported (RE2 syntax): %v", p, rerr)
			}
			n.pattern = re
		case "allOf":
			n.allOf, err = c.subList(v, at, true)
		case "anyOf":
			n.anyOf, err = c.subList(v, at, true)
		case "oneOf":
			n.oneOf, err = c.subList(v, at, true)
		case "not":
			n.not, err = c.sub(v, at)
		case "if":
			n.ifS, err = c.sub(v, at)
		case "then":
			n.thenS, err = c.sub(v, at)
		case "else":
			n.elseS, err = c.sub(v, at)
		case "$defs", "definitions":
			_, err = c.subMap(v, at)
		case "$ref":
			ref, ok := v.(string)
			if !ok {
				return c.fail(at, "must be a string")
			}
			if ref != "#" && !strings.HasPrefix(ref, "#/") {
				return c.fail(at, "$ref %q is not supported: only local references (\"#\" or \"#/...\")", ref)
			}
			c.pending = append(c.pending, pendingRef{n, ref, at})
		case "title", "description", "$schema", "$id", "id", "$comment", "format", "$anchor":
			if _, ok := v.(string); !ok {
				return c.fail(at, "must be a string")
			}
		case "examples":
			if _, ok := v.([]any); !ok {
				return c.fail(at, "must be an array")
			}
		}
		if err != nil {
			return err
		}
	}
	if n.hasMinimum && n.hasMaximum && n.minimum > n.maximum {
		return c.fail(ptr, "minimum %v is greater than maximum %v", n.minimum, n.maximum)
	}
	return nil
}

func (n *node) limit(k string) *int {
	switch k {
	case "minProperties":
		return &n.minProps
	case "maxProperties":
		return &n.maxProps
	case "minItems":
		return &n.minItems
	case "maxItems":
		return &n.maxItems
	case "minLength":
		return &n.minLength
	case "maxLength":
		return &n.maxLength
	case "minContains":
		return &n.minContains
	}
	return &n.maxContains
}

func (c *compiler) typeKeyword(v any, at string) (typeSet, error) {
	switch t := v.(type) {
	case string:
		ts, ok := typeNames[t]
		if !ok {
			return 0, c.fail(at, "unknown type %q", t)
		}
		return ts, nil
	case []any:
		var set typeSet
		if len(t) == 0 {
			return 0, c.fail(at, "must not be an empty array")
		}
		for _, e := range t {
			s, ok := e.(string)
			ts, known := typeNames[s]
			if !ok || !known {
				return 0, c.fail(at, "unknown type %v", jsonText(e))
			}
			if set&ts != 0 {
				return 0, c.fail(at, "type %q listed twice", s)
			}
			set |= ts
		}
		return set, nil
	}
	return 0, c.fail(at, "must be a type name or an array of type names")
}

func (c *compiler) depRequired(v any, at string) (map[string][]string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, c.fail(at, "must be an object of string arrays")
	}
	out := make(map[string][]string, len(m))
	for k, e := range m {
		names, ok := uniqueStrings(e)
		if !ok {
			return nil, c.fail(at+"/"+escapeToken(k), "must be an array of unique strings")
		}
		out[k] = names
	}
	return out, nil
}

// dependencies is the draft-07 keyword that 2020-12 split into
// dependentRequired (array values) and dependentSchemas (schema values).
func (c *compiler) dependencies(n *node, v any, at string) error {
	m, ok := v.(map[string]any)
	if !ok {
		return c.fail(at, "must be an object")
	}
	for _, k := range sortedKeys(m) {
		e := m[k]
		kat := at + "/" + escapeToken(k)
		if _, isArr := e.([]any); isArr {
			names, ok := uniqueStrings(e)
			if !ok {
				return c.fail(kat, "must be an array of unique strings")
			}
			if n.depRequired == nil {
				n.depRequired = map[string][]string{}
			}
			n.depRequired[k] = names
			continue
		}
		sn, err := c.sub(e, kat)
		if err != nil {
			return err
		}
		if n.depSchemas == nil {
			n.depSchemas = map[string]*node{}
		}
		n.depSchemas[k] = sn
	}
	return nil
}

// exclusive handles both the numeric (draft-06 and later) and the boolean
// (draft-04, modifying minimum/maximum) forms.
func (c *compiler) exclusive(n *node, s map[string]any, k string, v any, at string) error {
	switch t := v.(type) {
	case float64:
		if k == "exclusiveMinimum" {
			n.exclMin, n.hasExclMin = t, true
		} else {
			n.exclMax, n.hasExclMax = t, true
		}
		return nil
	case bool:
		bound := "minimum"
		if k == "exclusiveMaximum" {
			bound = "maximum"
		}
		f, ok := s[bound].(float64)
		if !ok {
			return c.fail(at, "boolean form needs a numeric %q beside it", bound)
		}
		if t {
			if k == "exclusiveMinimum" {
				n.exclMin, n.hasExclMin = f, true
			} else {
				n.exclMax, n.hasExclMax = f, true
			}
		}
		return nil
	}
	return c.fail(at, "must be a number")
}

// resolvePointer resolves "#" or "#/a/b" (URI fragment, percent-encoded JSON
// pointer) inside doc.
func resolvePointer(doc any, ref string) (any, bool) {
	frag, ok := percentDecode(strings.TrimPrefix(ref, "#"))
	if !ok {
		return nil, false
	}
	if frag == "" {
		return doc, true
	}
	cur := doc
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t := cur.(type) {
		case map[string]any:
			next, ok := t[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			cur = t[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func percentDecode(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		x, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(x))
		i += 2
	}
	return b.String(), true
}

// checkCycles refuses schemas whose in-place applicators ($ref, allOf,
// anyOf, oneOf, not, if/then/else, dependentSchemas) form a loop: such a
// schema would apply itself to the same value forever. Loops through
// properties or items are fine, as each step descends into the value.
func checkCycles(root *node) error {
	// Every node reachable by any edge, then a colouring DFS over the
	// in-place edges alone.
	all := []*node{root}
	seen := map[*node]bool{root: true}
	for i := 0; i < len(all); i++ {
		for _, m := range append(all[i].inPlace(), all[i].descending()...) {
			if !seen[m] {
				seen[m] = true
				all = append(all, m)
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make(map[*node]int, len(all))
	var visit func(n *node) error
	visit = func(n *node) error {
		switch color[n] {
		case grey:
			return &CompileError{"#", "circular $ref: a schema applies itself to the same value"}
		case black:
			return nil
		}
		color[n] = grey
		for _, m := range n.inPlace() {
			if err := visit(m); err != nil {
				return err
			}
		}
		color[n] = black
		return nil
	}
	for _, n := range all {
		if err := visit(n); err != nil {
			return err
		}
	}
	return nil
}

func (n *node) inPlace() []*node {
	var out []*node
	add := func(m *node) {
		if m != nil {
			out = append(out, m)
		}
	}
	add(n.ref)
	add(n.not)
	add(n.ifS)
	add(n.thenS)
	add(n.elseS)
	out = append(out, n.allOf...)
	out = append(out, n.anyOf...)
	out = append(out, n.oneOf...)
	for _, k := range sortedNodeKeys(n.depSchemas) {
		out = append(out, n.depSchemas[k])
	}
	return out
}

func (n *node) descending() []*node {
	var out []*node
	add := func(m *node) {
		if m != nil {
			out = append(out, m)
		}
	}
	for _, k := range sortedNodeKeys(n.properties) {
		out = append(out, n.properties[k])
	}
	for _, p := range n.patternProps {
		out = append(out, p.schema)
	}
	add(n.additional)
	add(n.propertyNames)
	out = append(out, n.prefixItems...)
	add(n.items)
	add(n.contains)
	return out
}

func sortedNodeKeys(m map[string]*node) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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

// IsCompileError reports whether err came from Compile.
func IsCompileError(err error) bool {
	var ce *CompileError
	return errors.As(err, &ce)
}
