package policy

import (
	"bytes"
	"testing"
)

// FuzzEditRule: AddRule and RemoveRule on any file and any rule. A rule
// that does not parse, or a file that does not parse, is refused with a
// *ControlError and nothing comes back. Otherwise, after AddRule the file
// parses and grants the rule, with the old bytes as its prefix; after
// RemoveRule it parses, no longer grants the rule, and keeps every other
// rule.
func FuzzEditRule(f *testing.F) {
	f.Add([]byte("allow coder_t tool:fs.read execute\n"), "coder_t", "tool:fs.write", "execute")
	f.Add([]byte("allow coder_t tool:fs.read execute"), "coder_t", "tool:fs.read", "execute")
	f.Add([]byte("allow  coder_t\ttool:fs.read execute\r\n\nallow x_t shared:p read\n"), "coder_t", "tool:fs.read", "execute")
	f.Add([]byte("# comment\n"), "a_t", "tool:t", "execute")
	f.Add([]byte(""), "a b", "tool:t", "execute")
	f.Fuzz(func(t *testing.T, data []byte, subject, object, perm string) {
		r, err := ParseRule(subject, object, perm)
		if err != nil {
			checkControlError(t, "policy", []byte("x"), err)
			return
		}
		before, perr := ParsePolicy(data)
		added, changed, err := AddRule(data, r)
		if perr != nil {
			if err == nil || added != nil {
				t.Fatalf("AddRule extended a file that does not parse: %q", data)
			}
			if _, _, err := RemoveRule(data, r); err == nil {
				t.Fatalf("RemoveRule edited a file that does not parse: %q", data)
			}
			return
		}
		if err != nil {
			t.Fatalf("AddRule on a valid file: %v", err)
		}
		p, err := ParsePolicy(added)
		if err != nil || !p.Allows(r.Subject, r.Object, r.Permission) || !bytes.HasPrefix(added, data) {
			t.Fatalf("AddRule(%q, %q) = %q, %v", data, r, added, err)
		}
		if changed == before.Allows(r.Subject, r.Object, r.Permission) {
			t.Fatalf("AddRule changed=%v for a file that granted it: %v", changed, !changed)
		}
		removed, _, err := RemoveRule(added, r)
		if err != nil {
			t.Fatalf("RemoveRule on a valid file: %v", err)
		}
		q, err := ParsePolicy(removed)
		if err != nil || q.Allows(r.Subject, r.Object, r.Permission) {
			t.Fatalf("RemoveRule(%q, %q) = %q, %v", added, r, removed, err)
		}
		for _, o := range before.Rules() {
			if o != r && !q.Allows(o.Subject, o.Object, o.Permission) {
				t.Fatalf("RemoveRule(%q, %q) lost %q", added, r, o)
			}
		}
	})
}

// FuzzToolRefusal: whatever the account holds, a layer found is one of
// the known layers, and only for a line naming exactly that tool.
func FuzzToolRefusal(f *testing.F) {
	f.Add([]byte("tool:fs.read execute rejected tool-policy\ntool:fs.write execute granted\n"), "fs.read")
	f.Add([]byte("tool:fs.read execute rejected \x1b[2Jx\n"), "fs.read")
	f.Add([]byte("tool:fs.readx execute rejected perm\n"), "fs.read")
	f.Fuzz(func(t *testing.T, data []byte, tool string) {
		layer, ok := ToolRefusal(data, tool)
		if !ok {
			return
		}
		known := false
		for _, l := range refusalLayers {
			known = known || l == layer
		}
		if !known || !bytes.Contains(data, []byte("tool:"+tool+" execute rejected "+string(layer))) {
			t.Fatalf("ToolRefusal(%q, %q) = %q", data, tool, layer)
		}
	})
}
