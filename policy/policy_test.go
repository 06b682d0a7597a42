package policy

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

var (
	name64 = "a" + strings.Repeat("b", 63)
	name65 = "a" + strings.Repeat("b", 64)
)

func TestParsePolicyValid(t *testing.T) {
	tests := []struct {
		name  string
		input string
		rules []string // canonical rule strings
	}{
		{"empty file", "", nil},
		{"only blank lines", "\n\n  \t \n", nil},
		{"seed examples", `allow coder_t tool:fs.read execute
allow coder_t tool:shell.exec execute
allow coder_t model:openai/gpt-5.6 use
allow coder_t shared:project-a read
allow coder_t shared:project-a write
allow coder_t network:default connect
allow coder_t agent:reviewer create
allow coder_t agent:reviewer start
`, []string{
			"allow coder_t tool:fs.read execute",
			"allow coder_t tool:shell.exec execute",
			"allow coder_t model:openai/gpt-5.6 use",
			"allow coder_t shared:project-a read",
			"allow coder_t shared:project-a write",
			"allow coder_t network:default connect",
			"allow coder_t agent:reviewer create",
			"allow coder_t agent:reviewer start",
		}},
		{"every class and permission", `allow s tool:t execute
allow s model:main use
allow s model:helper use
allow s shared:x read
allow s shared:x write
allow s session:x read
allow s session:x write
allow s session:x resume
allow s mount:x read
allow s mount:x write
allow s agent:x create
allow s agent:x start
allow s agent:x stop
allow s agent:x read
allow s agent:x write
allow s network:default connect
`, nil},
		{"no final newline", "allow a tool:b execute", []string{"allow a tool:b execute"}},
		{"CRLF", "allow a tool:b execute\r\nallow a tool:c execute\r\n", []string{"allow a tool:b execute", "allow a tool:c execute"}},
		{"tabs and runs of spaces", "  allow\ta \t tool:b\t\texecute  \n", []string{"allow a tool:b execute"}},
		{"blank lines between rules", "\nallow a tool:b execute\n\n\nallow a tool:c execute\n", []string{"allow a tool:b execute", "allow a tool:c execute"}},
		{"duplicates kept", "allow a tool:b execute\nallow a tool:b execute\n", []string{"allow a tool:b execute", "allow a tool:b execute"}},
		{"64-byte subject and name", "allow " + name64 + " tool:" + name64 + " execute\n", []string{"allow " + name64 + " tool:" + name64 + " execute"}},
		{"model components of 64 bytes", "allow a model:" + name64 + "/" + name64 + " use\n", nil},
		{"name grammar punctuation", "allow a.b_c+d-e tool:0x.y_z+w-v execute\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tt.input))
			if err != nil {
				t.Fatalf("ParsePolicy: %v", err)
			}
			if tt.rules != nil {
				var got []string
				for _, r := range p.Rules() {
					got = append(got, r.String())
				}
				if strings.Join(got, "\n") != strings.Join(tt.rules, "\n") {
					t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.rules, "\n"))
				}
			}
		})
	}
}

func TestParsePolicyInvalid(t *testing.T) {
	tests := []struct {
		name  string
		input string
		line  int
		field string
		kind  ErrorKind
	}{
		{"comment line", "# allow a tool:b execute\n", 1, "", KindFieldCount},
		{"one-word comment", "#\n", 1, "", KindFieldCount},
		{"four-field comment", "# a tool:b execute\n", 1, "statement", KindExpectedAllow},
		{"trailing comment", "allow a tool:b execute # why\n", 1, "", KindFieldCount},
		{"three fields", "allow a tool:b\n", 1, "", KindFieldCount},
		{"five fields", "allow a tool:b execute now\n", 1, "", KindFieldCount},
		{"bad line after good ones", "allow a tool:b execute\n\nallow a tool:c\n", 3, "", KindFieldCount},
		{"deny rule", "deny a tool:b execute\n", 1, "statement", KindExpectedAllow},
		{"Allow capitalised", "Allow a tool:b execute\n", 1, "statement", KindExpectedAllow},
		{"subject 65 bytes", "allow " + name65 + " tool:b execute\n", 1, "subject", KindInvalidName},
		{"subject with slash", "allow a/b tool:b execute\n", 1, "subject", KindInvalidName},
		{"subject ending .d", "allow a.d tool:b execute\n", 1, "subject", KindInvalidName},
		{"subject variable", "allow $s tool:b execute\n", 1, "subject", KindInvalidName},
		{"no colon", "allow a tool execute\n", 1, "object", KindInvalidObject},
		{"empty class", "allow a :b execute\n", 1, "object", KindInvalidObject},
		{"unknown class", "allow a file:b read\n", 1, "class", KindUnknownClass},
		{"class capitalised", "allow a Tool:b execute\n", 1, "class", KindUnknownClass},
		{"glob name", "allow a agent:* create\n", 1, "name", KindInvalidName},
		{"glob suffix", "allow a tool:fs.* execute\n", 1, "name", KindInvalidName},
		{"empty name", "allow a tool: execute\n", 1, "name", KindInvalidName},
		{"name 65 bytes", "allow a tool:" + name65 + " execute\n", 1, "name", KindInvalidName},
		{"name with second colon", "allow a tool:b:c execute\n", 1, "name", KindInvalidName},
		{"path name", "allow a shared:/srv/x read\n", 1, "name", KindInvalidName},
		{"model without provider", "allow a model:gpt use\n", 1, "name", KindInvalidName},
		{"model with two slashes", "allow a model:a/b/c use\n", 1, "name", KindInvalidName},
		{"model component 65", "allow a model:a/" + name65 + " use\n", 1, "name", KindInvalidName},
		{"network not default", "allow a network:internet connect\n", 1, "name", KindInvalidName},
		{"network Default", "allow a network:Default connect\n", 1, "name", KindInvalidName},
		{"unknown permission", "allow a tool:b run\n", 1, "permission", KindUnknownPermission},
		{"permission of another class", "allow a tool:b read\n", 1, "permission", KindUnknownPermission},
		{"permission capitalised", "allow a tool:b Execute\n", 1, "permission", KindUnknownPermission},
		{"shared resume", "allow a shared:b resume\n", 1, "permission", KindUnknownPermission},
		{"non-ASCII space is not a separator", "allow a\u00a0tool:b execute x\n", 1, "subject", KindInvalidName},
		{"NUL in line", "allow a tool:b\x00 execute\n", 1, "name", KindInvalidName},
		{"priority field", "allow 10 a tool:b execute\n", 1, "", KindFieldCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tt.input))
			if err == nil {
				t.Fatalf("ParsePolicy accepted %q: %d rules", tt.input, p.Len())
			}
			if p != nil {
				t.Errorf("a rejected file must yield no policy")
			}
			var ce *ControlError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *ControlError", err, err)
			}
			if ce.Control != "policy" || ce.Line != tt.line || ce.Field != tt.field || ce.Kind != tt.kind {
				t.Errorf("got control=%q line=%d field=%q kind=%v (%v), want line=%d field=%q kind=%v",
					ce.Control, ce.Line, ce.Field, ce.Kind, err, tt.line, tt.field, tt.kind)
			}
			if !errors.Is(err, syscall.EINVAL) {
				t.Errorf("error does not unwrap to EINVAL")
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Errorf("message %q does not name the line", err)
			}
			// A line with a field starting with # says # is no comment;
			// no other line does.
			hinted := strings.Contains(err.Error(), "# is not a comment")
			if hasHash := strings.Contains(tt.input, "#"); hinted != hasHash {
				t.Errorf("message %q: comment hint %v, want %v", err, hinted, hasHash)
			}
		})
	}
}

func TestPolicyCommentHint(t *testing.T) {
	for in, want := range map[string]string{
		"allow a tool:b execute\n# why\n":       `policy: line 2: expected 4 fields (allow SUBJECT CLASS:NAME PERMISSION), found 2; # is not a comment: policy files have no comment syntax (ctx man policy), delete the line`,
		"allow a tool:b execute # why\n":        `policy: line 1: expected 4 fields (allow SUBJECT CLASS:NAME PERMISSION), found 6; # is not a comment: policy files have no comment syntax (ctx man policy), delete the text from # on`,
		"#allow a tool:b execute\n":             `policy: line 1: statement: expected "allow", found "#allow"; # is not a comment: policy files have no comment syntax (ctx man policy), delete the line`,
		"allow a tool:b execute\nallow a#b c\n": `policy: line 2: expected 4 fields (allow SUBJECT CLASS:NAME PERMISSION), found 3`,
	} {
		_, err := ParsePolicy([]byte(in))
		if err == nil || err.Error() != want {
			t.Errorf("ParsePolicy(%q) = %v\nwant %s", in, err, want)
		}
	}
}

func TestPolicyAllows(t *testing.T) {
	p, err := ParsePolicy([]byte("allow coder_t tool:fs.read execute\nallow coder_t model:openai/gpt-5.6 use\nallow coder_t network:default connect\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		subject string
		obj     string
		perm    Permission
		want    bool
	}{
		{"coder_t", "tool:fs.read", PermExecute, true},
		{"coder_t", "tool:fs.write", PermExecute, false},
		{"coder_t", "tool:fs.rea", PermExecute, false},
		{"coder_t", "tool:fs.read2", PermExecute, false},
		{"Coder_t", "tool:fs.read", PermExecute, false},
		{"reviewer_t", "tool:fs.read", PermExecute, false},
		{"coder_t", "model:openai/gpt-5.6", PermUse, true},
		{"coder_t", "model:main", PermUse, false}, // an alias is its own object: no resolution here
		{"coder_t", "network:default", PermConnect, true},
		{"coder_t", "shared:fs.read", PermRead, false}, // same name, other class
	}
	for _, tt := range tests {
		obj, err := ParseObject(tt.obj)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Allows(tt.subject, obj, tt.perm); got != tt.want {
			t.Errorf("Allows(%s, %s, %s) = %v, want %v", tt.subject, tt.obj, tt.perm, got, tt.want)
		}
	}
	var nilPolicy *Policy
	if nilPolicy.Allows("coder_t", Object{ClassTool, "fs.read"}, PermExecute) {
		t.Error("a nil policy allowed something")
	}
}

func TestPolicyFormatRoundTrip(t *testing.T) {
	in := "\r\n  allow\ta  tool:b execute \r\n\nallow a model:main use\nallow a tool:b execute"
	p, err := ParsePolicy([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := "allow a tool:b execute\nallow a model:main use\nallow a tool:b execute\n"
	if got := string(p.Format()); got != want {
		t.Fatalf("Format = %q, want %q", got, want)
	}
	// A canonical file formats to itself.
	q, err := ParsePolicy([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(q.Format()); got != want {
		t.Fatalf("canonical file changed: %q", got)
	}
}

func TestParseObjectAndPermission(t *testing.T) {
	for _, tt := range []struct {
		in   string
		kind ErrorKind
	}{
		{"tool:fs.read", 0},
		{"model:helper", 0},
		{"network:default", 0},
		{"file:x", KindUnknownClass},
		{"tool", KindInvalidObject},
		{":x", KindInvalidObject},
		{"tool:*", KindInvalidName},
		{"network:lan", KindInvalidName},
	} {
		_, err := ParseObject(tt.in)
		if tt.kind == 0 {
			if err != nil {
				t.Errorf("ParseObject(%q): %v", tt.in, err)
			}
			continue
		}
		var re *ControlError
		if !errors.As(err, &re) || re.Kind != tt.kind || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("ParseObject(%q) = %v, want kind %v and EINVAL", tt.in, err, tt.kind)
		}
	}
	if p, err := ParsePermission(ClassAgent, "stop"); err != nil || p != PermStop {
		t.Errorf("ParsePermission(agent, stop) = %v, %v", p, err)
	}
	_, err := ParsePermission(ClassTool, "read")
	var re *ControlError
	if !errors.As(err, &re) || re.Kind != KindUnknownPermission || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("ParsePermission(tool, read) = %v", err)
	}
}

func TestClassPermissionsAreTheSeeds(t *testing.T) {
	want := map[string]string{
		"tool": "execute", "model": "use", "shared": "read write", "session": "read write resume",
		"mount": "read write", "agent": "create start stop read write", "network": "connect",
	}
	for _, c := range Classes() {
		if got := permList(c); got != want[c.String()] {
			t.Errorf("class %s: %q, want %q", c, got, want[c.String()])
		}
	}
	if len(Classes()) != len(want) {
		t.Errorf("%d classes, want %d", len(Classes()), len(want))
	}
}

// Classes returns every class in the seed's order.
func Classes() []Class {
	return []Class{ClassTool, ClassModel, ClassShared, ClassSession, ClassMount, ClassAgent, ClassNetwork}
}
