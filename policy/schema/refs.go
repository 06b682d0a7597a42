package schema

import (
	"sort"
	"strconv"
	"strings"
)

// $ref resolution and the refusal of schemas that apply themselves in place forever.

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
