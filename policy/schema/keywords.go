package schema

import (
	"regexp"
	"strings"
)

// The keywords of a schema object, compiled one by one into a node.

// keywords compiles the keywords of an object schema in sorted order, so the
// first structural error reported is deterministic.
//
// long: one case per JSON Schema keyword, in one switch so that each
// keyword is compiled in exactly one place and the order of errors stays
// the sorted order of the keys.
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
