package policy

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// Every parser has a fuzz target. Beyond "never panics", each checks that
// an error is a *ControlError pointing at a line that exists, and that an
// accepted input renders to a canonical form that parses back to the same
// value and renders to itself. Seeds live in testdata/fuzz/FuzzXxx/.

// checkControlError fails unless err is a *ControlError for control whose
// line number lies within data.
func checkControlError(t *testing.T, control string, data []byte, err error) {
	t.Helper()
	var ce *ControlError
	if !errors.As(err, &ce) {
		t.Fatalf("error %T %v is not a *ControlError", err, err)
	}
	if ce.Control != control {
		t.Fatalf("error names control %q, want %q", ce.Control, control)
	}
	lines := bytes.Count(data, []byte{'\n'}) + 1
	if ce.Line < 0 || ce.Line > lines {
		t.Fatalf("error line %d outside a %d-line input: %v", ce.Line, lines, err)
	}
	if bytes.ContainsAny([]byte(ce.Error()), "\n\x1b") {
		t.Fatalf("error message is not one safe line: %q", ce.Error())
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			checkControlError(t, "policy", data, err)
			return
		}
		canon := p.Format()
		q, err := ParsePolicy(canon)
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", canon, err)
		}
		if !reflect.DeepEqual(p.Rules(), q.Rules()) || !bytes.Equal(q.Format(), canon) {
			t.Fatalf("round trip changed %q", canon)
		}
		for _, r := range p.Rules() {
			if !p.Allows(r.Subject, r.Object, r.Permission) {
				t.Fatalf("parsed rule %q not allowed", r)
			}
		}
	})
}

func FuzzParseMounts(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMounts(data)
		if err != nil {
			checkControlError(t, "mount", data, err)
			return
		}
		canon := FormatMounts(m)
		m2, err := ParseMounts(canon)
		if err != nil || !reflect.DeepEqual(m, m2) || !bytes.Equal(FormatMounts(m2), canon) {
			t.Fatalf("round trip of %q: %v", canon, err)
		}
		v := View{Mounts: m}
		for _, e := range m {
			if loc, ok := v.Locate(e.Source); ok && !Within(loc.SandboxPath, loc.Mount.Target) {
				t.Fatalf("located %q at %q outside its mount %q", e.Source, loc.SandboxPath, loc.Mount.Target)
			}
		}
	})
}

func FuzzParseLabel(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		label, subject, err := ParseLabel(data)
		if err != nil {
			checkControlError(t, "label", data, err)
			return
		}
		if ValidName(subject) != nil {
			t.Fatalf("subject %q of %q is not a valid name", subject, label)
		}
		if l2, s2, err := ParseLabel([]byte(label + "\n")); err != nil || l2 != label || s2 != subject {
			t.Fatalf("round trip of %q: %q %q %v", label, l2, s2, err)
		}
	})
}

func FuzzParseCeiling(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCeiling(data)
		if err != nil {
			checkControlError(t, "perm", data, err)
			return
		}
		if c&^CeilingAll != 0 {
			t.Fatalf("ceiling %d has stray bits", c)
		}
		if c2, err := ParseCeiling([]byte(c.String() + "\n")); err != nil || c2 != c {
			t.Fatalf("round trip of %s: %v", c, err)
		}
	})
}

func FuzzParseParent(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseParent(data)
		if err != nil {
			checkControlError(t, "parent", data, err)
			return
		}
		if p2, err := ParseParent([]byte(p.String() + "\n")); err != nil || p2 != p {
			t.Fatalf("round trip of %q: %+v %v", p.String(), p2, err)
		}
	})
}

func FuzzParseEnv(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := ParseEnv(data)
		if err != nil {
			checkControlError(t, "env", data, err)
			return
		}
		canon := FormatEnv(vars)
		v2, err := ParseEnv(canon)
		if err != nil || !reflect.DeepEqual(vars, v2) {
			t.Fatalf("round trip of %q: %v", canon, err)
		}
	})
}

func FuzzParsePath(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		dirs, err := ParsePath(data)
		if err != nil {
			checkControlError(t, "path", data, err)
			return
		}
		d2, err := ParsePath(FormatLines(dirs))
		if err != nil || !reflect.DeepEqual(dirs, d2) {
			t.Fatalf("round trip of %q: %v", dirs, err)
		}
	})
}

func FuzzParseTools(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		tools, err := ParseTools(data)
		if err != nil {
			checkControlError(t, "tools", data, err)
			return
		}
		// tools accepts only the canonical form, so rendering gives the input.
		if got := FormatLines(tools); !bytes.Equal(got, data) {
			t.Fatalf("accepted non-canonical %q (canonical %q)", data, got)
		}
	})
}

func FuzzParseWindow(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWindow(data)
		if err != nil {
			checkControlError(t, "window", data, err)
			return
		}
		if !w.Auto && w.Tokens == 0 {
			t.Fatal("accepted a zero window")
		}
		if w2, err := ParseWindow([]byte(w.String() + "\n")); err != nil || w2 != w {
			t.Fatalf("round trip of %s: %v", w, err)
		}
	})
}

func FuzzParseIdentity(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := ParseIdentity(data)
		if err != nil {
			checkControlError(t, "identity", data, err)
			return
		}
		canon := id.Format()
		id2, err := ParseIdentity(canon)
		if err != nil || id2 != id || !bytes.Equal(id2.Format(), canon) {
			t.Fatalf("round trip of %q: %v", canon, err)
		}
		if s, _ := LabelSubject(id.Label); s != id.Subject {
			t.Fatalf("subject %q does not match label %q", id.Subject, id.Label)
		}
	})
}

// sameSizeSyntax: the input as a value of disk_bytes parses exactly as
// it does for the other byte budgets (same value, or an error for both).
func sameSizeSyntax(t *testing.T, data []byte) {
	if bytes.ContainsAny(data, "\r\n") {
		return
	}
	d, derr := ParseBudgets(append([]byte("disk_bytes="), data...))
	for _, k := range []string{"file_bytes", "tmp_bytes", "memory_bytes"} {
		o, oerr := ParseBudgets(append([]byte(k+"="), data...))
		if (derr == nil) != (oerr == nil) || (derr == nil && d.Get("disk_bytes") != o.Get(k)) {
			t.Fatalf("disk_bytes=%q: %v %v; %s: %v %v", data, d.Get("disk_bytes"), derr, k, o.Get(k), oerr)
		}
	}
}

func FuzzParseBudgets(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		sameSizeSyntax(t, data)
		b, err := ParseBudgets(data)
		if err != nil {
			checkControlError(t, "budgets", data, err)
			return
		}
		b2, err := ParseBudgets(FormatBudgets(b))
		if err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("round trip of %q: %v", FormatBudgets(b), err)
		}
	})
}
