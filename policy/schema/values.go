package schema

import (
	"encoding/json"
	"math"
	"strings"
)

// JSON values as the validator sees them: their kinds, numbers and
// equality.

// number returns v as a float64 when it is a JSON number.
func number(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case float32:
		return float64(t), true
	}
	return 0, false
}

func kindOf(v any) typeSet {
	switch t := v.(type) {
	case nil:
		return typeNull
	case bool:
		return typeBoolean
	case string:
		return typeString
	case map[string]any:
		return typeObject
	case []any:
		return typeArray
	default:
		f, ok := number(t)
		if !ok {
			return 0
		}
		if f == math.Trunc(f) && !math.IsInf(f, 0) {
			return typeNumber | typeInteger
		}
		return typeNumber
	}
}

func typeList(ts typeSet) string {
	var names []string
	for _, n := range []string{"null", "boolean", "object", "array", "number", "string", "integer"} {
		if ts&typeNames[n] != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, " or ")
}

func kindName(k typeSet) string {
	switch {
	case k&typeInteger != 0:
		return "integer"
	case k == 0:
		return "unsupported value"
	}
	return typeList(k)
}

// jsonEqual is JSON value equality: numbers by value (1 == 1.0), objects
// regardless of key order.
func jsonEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// firstDuplicate finds two equal items. Scalars go through a map so a long
// array of strings or numbers costs O(n), not O(n²); arrays holding objects
// or arrays fall back to pairwise comparison.
func firstDuplicate(a []any) (int, int, bool) {
	scalar := true
	for _, e := range a {
		switch e.(type) {
		case []any, map[string]any:
			scalar = false
		}
	}
	if scalar {
		type key struct {
			kind typeSet
			s    string
			f    float64
			b    bool
		}
		seen := make(map[key]int, len(a))
		for i, e := range a {
			var k key
			switch t := e.(type) {
			case nil:
				k.kind = typeNull
			case bool:
				k.kind, k.b = typeBoolean, t
			case string:
				k.kind, k.s = typeString, t
			default:
				f, _ := number(t)
				k.kind, k.f = typeNumber, f
			}
			if j, ok := seen[k]; ok {
				return j, i, true
			}
			seen[k] = i
		}
		return 0, 0, false
	}
	for i := range a {
		for j := i + 1; j < len(a); j++ {
			if jsonEqual(a[i], a[j]) {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}
