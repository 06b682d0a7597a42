package schema

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ValidationError is the first place where a value fails a schema.
type ValidationError struct {
	Pointer string // JSON pointer of the failing value: "" is the whole value, "/path" a property
	Keyword string // the schema keyword that failed: "type", "required", ...
	Msg     string
}

// Error prints the pointer in URI-fragment form, so the whole value reads
// "#" and a property "#/path".
func (e *ValidationError) Error() string { return "#" + e.Pointer + ": " + e.Msg }

// state carries the location of the value being validated as a stack of
// tokens, turned into a JSON pointer only when a failure is reported. One
// state is allocated per Validate call; the first levels of nesting fit in
// its inline array.
type state struct {
	stack  []token
	inline [16]token
}

type token struct {
	key   string
	index int
	isIdx bool
}

func (st *state) push(k string) { st.stack = append(st.stack, token{key: k}) }
func (st *state) pushIdx(i int) { st.stack = append(st.stack, token{index: i, isIdx: true}) }
func (st *state) pop()          { st.stack = st.stack[:len(st.stack)-1] }

func (st *state) pointer() string {
	var b strings.Builder
	for _, t := range st.stack {
		b.WriteByte('/')
		if t.isIdx {
			b.WriteString(strconv.Itoa(t.index))
		} else {
			b.WriteString(escapeToken(t.key))
		}
	}
	return b.String()
}

func failure(st *state, keyword, format string, args ...any) *ValidationError {
	return &ValidationError{Pointer: st.pointer(), Keyword: keyword, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks v, a value as decoded by encoding/json (nil, bool,
// float64 or json.Number, string, []any, map[string]any; Go ints are
// accepted too), and returns nil or the first *ValidationError.
func (s *Schema) Validate(v any) error {
	st := &state{}
	st.stack = st.inline[:0]
	if err := s.root.validate(v, st); err != nil {
		return err
	}
	return nil
}

func (n *node) validate(v any, st *state) *ValidationError {
	switch n.always {
	case 1:
		return nil
	case -1:
		return failure(st, "false", "no value is allowed here")
	}
	kind := kindOf(v)
	if n.types != 0 && n.types&kind == 0 {
		return failure(st, "type", "expected %s, got %s", typeList(n.types), kindName(kind))
	}
	if n.hasConst && !jsonEqual(v, n.constVal) {
		return failure(st, "const", "value must be %s", jsonText(n.constVal))
	}
	if n.hasEnum {
		found := false
		for _, e := range n.enum {
			if jsonEqual(v, e) {
				found = true
				break
			}
		}
		if !found {
			return failure(st, "enum", "value must be one of %s", jsonText(n.enum))
		}
	}
	switch t := v.(type) {
	case string:
		if err := n.validateString(t, st); err != nil {
			return err
		}
	case map[string]any:
		if err := n.validateObject(t, st); err != nil {
			return err
		}
	case []any:
		if err := n.validateArray(t, st); err != nil {
			return err
		}
	default:
		if f, ok := number(v); ok {
			if err := n.validateNumber(f, st); err != nil {
				return err
			}
		}
	}
	return n.validateApplicators(v, st)
}

func (n *node) validateString(s string, st *state) *ValidationError {
	if n.minLength >= 0 || n.maxLength >= 0 {
		l := utf8.RuneCountInString(s)
		if n.minLength >= 0 && l < n.minLength {
			return failure(st, "minLength", "string is shorter than %d characters", n.minLength)
		}
		if n.maxLength >= 0 && l > n.maxLength {
			return failure(st, "maxLength", "string is longer than %d characters", n.maxLength)
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		return failure(st, "pattern", "string does not match pattern %q", n.pattern.String())
	}
	return nil
}

func (n *node) validateNumber(f float64, st *state) *ValidationError {
	switch {
	case n.hasMinimum && f < n.minimum:
		return failure(st, "minimum", "must be >= %v", n.minimum)
	case n.hasMaximum && f > n.maximum:
		return failure(st, "maximum", "must be <= %v", n.maximum)
	case n.hasExclMin && f <= n.exclMin:
		return failure(st, "exclusiveMinimum", "must be > %v", n.exclMin)
	case n.hasExclMax && f >= n.exclMax:
		return failure(st, "exclusiveMaximum", "must be < %v", n.exclMax)
	}
	if n.multipleOf > 0 {
		q := f / n.multipleOf
		if math.IsInf(q, 0) || math.Abs(q-math.Round(q)) > 1e-9*math.Max(1, math.Abs(q)) {
			return failure(st, "multipleOf", "must be a multiple of %v", n.multipleOf)
		}
	}
	return nil
}

func (n *node) validateObject(m map[string]any, st *state) *ValidationError {
	if n.minProps >= 0 && len(m) < n.minProps {
		return failure(st, "minProperties", "must have at least %d properties", n.minProps)
	}
	if n.maxProps >= 0 && len(m) > n.maxProps {
		return failure(st, "maxProperties", "must have at most %d properties", n.maxProps)
	}
	for _, r := range n.required {
		if _, ok := m[r]; !ok {
			return failure(st, "required", "missing required property %q", r)
		}
	}
	for k, deps := range n.depRequired {
		if _, ok := m[k]; !ok {
			continue
		}
		for _, d := range deps {
			if _, ok := m[d]; !ok {
				return failure(st, "dependentRequired", "property %q requires property %q", k, d)
			}
		}
	}
	if len(n.properties) == 0 && len(n.patternProps) == 0 && n.additional == nil && n.propertyNames == nil {
		return n.validateDependentSchemas(m, st)
	}
	// Map iteration order is random; visit keys in sorted order so that the
	// failure reported first is the same on every run. Small objects (the
	// usual tool input) avoid the sort allocation by checking all keys and
	// keeping the smallest failing one.
	var first *ValidationError
	firstKey := ""
	for k, val := range m {
		if first != nil && k >= firstKey {
			continue
		}
		st.push(k)
		err := n.validateProperty(k, val, st)
		st.pop()
		if err != nil {
			first, firstKey = err, k
		}
	}
	if first != nil {
		return first
	}
	return n.validateDependentSchemas(m, st)
}

// validateProperty checks one property; st already points at it.
func (n *node) validateProperty(k string, val any, st *state) *ValidationError {
	if n.propertyNames != nil {
		if err := n.propertyNames.validate(k, st); err != nil {
			return failure(st, "propertyNames", "property name %q is not allowed: %s", k, err.Msg)
		}
	}
	matched := false
	if ps, ok := n.properties[k]; ok {
		matched = true
		if err := ps.validate(val, st); err != nil {
			return err
		}
	}
	for _, pp := range n.patternProps {
		if pp.re.MatchString(k) {
			matched = true
			if err := pp.schema.validate(val, st); err != nil {
				return err
			}
		}
	}
	if !matched && n.additional != nil {
		if n.additional.always == -1 {
			return failure(st, "additionalProperties", "property %q is not allowed", k)
		}
		if err := n.additional.validate(val, st); err != nil {
			return err
		}
	}
	return nil
}

func (n *node) validateDependentSchemas(m map[string]any, st *state) *ValidationError {
	if len(n.depSchemas) == 0 {
		return nil
	}
	keys := make([]string, 0, len(n.depSchemas))
	for k := range n.depSchemas {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := m[k]; ok {
			if err := n.depSchemas[k].validate(m, st); err != nil {
				return err
			}
		}
	}
	return nil
}

func (n *node) validateArray(a []any, st *state) *ValidationError {
	if n.minItems >= 0 && len(a) < n.minItems {
		return failure(st, "minItems", "must have at least %d items", n.minItems)
	}
	if n.maxItems >= 0 && len(a) > n.maxItems {
		return failure(st, "maxItems", "must have at most %d items", n.maxItems)
	}
	for i, e := range a {
		s := n.items
		if i < len(n.prefixItems) {
			s = n.prefixItems[i]
		}
		if s == nil {
			continue
		}
		st.pushIdx(i)
		err := s.validate(e, st)
		st.pop()
		if err != nil {
			return err
		}
	}
	if n.contains != nil {
		count := 0
		for _, e := range a {
			if n.contains.validate(e, st) == nil {
				count++
			}
		}
		lo := n.minContains
		if lo < 0 {
			lo = 1
		}
		if count < lo {
			return failure(st, "contains", "must contain at least %d matching items, has %d", lo, count)
		}
		if n.maxContains >= 0 && count > n.maxContains {
			return failure(st, "maxContains", "must contain at most %d matching items, has %d", n.maxContains, count)
		}
	}
	if n.uniqueItems && len(a) > 1 {
		if i, j, dup := firstDuplicate(a); dup {
			return failure(st, "uniqueItems", "items %d and %d are equal", i, j)
		}
	}
	return nil
}

func (n *node) validateApplicators(v any, st *state) *ValidationError {
	if n.ref != nil {
		if err := n.ref.validate(v, st); err != nil {
			return err
		}
	}
	for _, s := range n.allOf {
		if err := s.validate(v, st); err != nil {
			return err
		}
	}
	if len(n.anyOf) > 0 {
		var firstErr *ValidationError
		ok := false
		for _, s := range n.anyOf {
			err := s.validate(v, st)
			if err == nil {
				ok = true
				break
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		if !ok {
			return failure(st, "anyOf", "value matches none of the anyOf schemas (first: %s)", firstErr.Error())
		}
	}
	if len(n.oneOf) > 0 {
		matches := 0
		for _, s := range n.oneOf {
			if s.validate(v, st) == nil {
				matches++
			}
		}
		if matches != 1 {
			return failure(st, "oneOf", "value matches %d of the oneOf schemas, exactly 1 required", matches)
		}
	}
	if n.not != nil && n.not.validate(v, st) == nil {
		return failure(st, "not", "value matches a schema it must not match")
	}
	if n.ifS != nil {
		if n.ifS.validate(v, st) == nil {
			if n.thenS != nil {
				if err := n.thenS.validate(v, st); err != nil {
					return err
				}
			}
		} else if n.elseS != nil {
			if err := n.elseS.validate(v, st); err != nil {
				return err
			}
		}
	}
	return nil
}
