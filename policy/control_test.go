package policy

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// parseAny parses data with the grammar of control and renders the value
// in a comparable form, so one table covers every grammar.
func parseAny(control string, data []byte) (string, error) {
	switch control {
	case "label":
		l, s, err := ParseLabel(data)
		return l + " -> " + s, err
	case "perm":
		c, err := ParseCeiling(data)
		return c.String(), err
	case "owner", "uid", "gid":
		n, err := ParseID(control, data)
		return fmt.Sprint(n), err
	case "groups":
		g, err := ParseGroups(data)
		return fmt.Sprint(g), err
	case "iso":
		v, err := ParseIso(data)
		return string(v), err
	case "life":
		v, err := ParseLife(data)
		return string(v), err
	case "approval":
		v, err := ParseApproval(data)
		return string(v), err
	case "abi":
		v, err := ParseABI(data)
		return string(v), err
	case "parent":
		p, err := ParseParent(data)
		return fmt.Sprintf("%q %q %q", p.Agent, p.Session, p.Run), err
	case "env":
		v, err := ParseEnv(data)
		return fmt.Sprintf("%q", v), err
	case "path":
		v, err := ParsePath(data)
		return fmt.Sprintf("%q", v), err
	case "tools":
		v, err := ParseTools(data)
		return fmt.Sprintf("%q", v), err
	case "window":
		w, err := ParseWindow(data)
		return w.String(), err
	case "model":
		return ParseModel(data)
	case "root", "cwd":
		return ParsePathControl(control, data)
	case "mount":
		m, err := ParseMounts(data)
		return string(FormatMounts(m)), err
	}
	panic("unknown control " + control)
}

type grammarCase struct {
	control string
	input   string
	want    string // rendered value when valid
	// for invalid input:
	line  int
	field string
	kind  ErrorKind
}

func runGrammarCases(t *testing.T, cases []grammarCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.control+"/"+fmt.Sprintf("%q", tt.input), func(t *testing.T) {
			got, err := parseAny(tt.control, []byte(tt.input))
			if tt.kind == 0 {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if got != tt.want {
					t.Fatalf("got %s, want %s", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted as %s", got)
			}
			var ce *ControlError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *ControlError", err, err)
			}
			if ce.Control != tt.control || ce.Line != tt.line || ce.Field != tt.field || ce.Kind != tt.kind {
				t.Errorf("got control=%q line=%d field=%q kind=%v (%v)\nwant control=%q line=%d field=%q kind=%v",
					ce.Control, ce.Line, ce.Field, ce.Kind, err, tt.control, tt.line, tt.field, tt.kind)
			}
			if !errors.Is(err, syscall.EINVAL) {
				t.Errorf("%v does not unwrap to EINVAL", err)
			}
			if !strings.HasPrefix(err.Error(), tt.control+": ") {
				t.Errorf("message %q does not start with the control name", err)
			}
		})
	}
}

func TestLabelGrammar(t *testing.T) {
	runGrammarCases(t, []grammarCase{
		{control: "label", input: "reviewer_t\n", want: "reviewer_t -> reviewer_t"},
		{control: "label", input: "reviewer_t", want: "reviewer_t -> reviewer_t"},
		{control: "label", input: "reviewer_t\r\n", want: "reviewer_t -> reviewer_t"},
		{control: "label", input: "user_u:agent_r:coder_t:s0\n", want: "user_u:agent_r:coder_t:s0 -> coder_t"},
		{control: "label", input: name64 + "\n", want: name64 + " -> " + name64},
		{control: "label", input: "u:r:" + name64 + ":s0\n", want: "u:r:" + name64 + ":s0 -> " + name64},
		{control: "label", input: "", line: 1, field: "label", kind: KindInvalidValue},
		{control: "label", input: "\n", line: 1, field: "label", kind: KindInvalidValue},
		{control: "label", input: name65 + "\n", line: 1, field: "label", kind: KindInvalidValue},
		{control: "label", input: "u:r:" + name65 + ":s0\n", line: 1, field: "type", kind: KindInvalidName},
		{control: "label", input: "coder_t\ncoder_t\n", line: 2, kind: KindExtraLine},
		{control: "label", input: "coder_t\n\n", line: 2, kind: KindExtraLine},
		{control: "label", input: " coder_t\n", line: 1, field: "label", kind: KindInvalidValue},
		{control: "label", input: "coder_t \n", line: 1, field: "label", kind: KindInvalidValue},
		{control: "label", input: "coder_t\t\n", line: 1, field: "label", kind: KindInvalidValue},
		{control: "label", input: "agent_r:coder_t:s0\n", line: 1, field: "label", kind: KindInvalidValue},
		{control: "label", input: "u:r:t:s0:c0.c1023\n", line: 1, field: "label", kind: KindInvalidValue},
		{control: "label", input: "u:r::s0\n", line: 1, field: "type", kind: KindInvalidName},
		{control: "label", input: ":r:t:s0\n", line: 1, field: "user", kind: KindInvalidName},
		{control: "label", input: "u:r:t:\n", line: 1, field: "level", kind: KindInvalidName},
		{control: "label", input: "u:r:t*:s0\n", line: 1, field: "type", kind: KindInvalidName},
	})
}

func TestPermGrammar(t *testing.T) {
	cases := []grammarCase{
		{control: "perm", input: "rw\n", line: 1, field: "perm", kind: KindInvalidValue},
		{control: "perm", input: "rwxr\n", line: 1, field: "perm", kind: KindInvalidValue},
		{control: "perm", input: "wrx\n", line: 1, field: "perm", kind: KindInvalidValue},
		{control: "perm", input: "RWX\n", line: 1, field: "perm", kind: KindInvalidValue},
		{control: "perm", input: "r-x \n", line: 1, field: "perm", kind: KindInvalidValue},
		{control: "perm", input: "755\n", line: 1, field: "perm", kind: KindInvalidValue},
		{control: "perm", input: "\n", line: 1, field: "perm", kind: KindInvalidValue},
		{control: "perm", input: "rwx\nrwx\n", line: 2, kind: KindExtraLine},
		{control: "perm", input: "rwx", want: "rwx"},
		{control: "perm", input: "rwx\r\n", want: "rwx"},
	}
	// All eight triplets round-trip.
	for c := Ceiling(0); c <= CeilingAll; c++ {
		cases = append(cases, grammarCase{control: "perm", input: c.String() + "\n", want: c.String()})
	}
	runGrammarCases(t, cases)
}

func TestIDGrammar(t *testing.T) {
	var cases []grammarCase
	for _, c := range []string{"owner", "uid", "gid"} {
		cases = append(cases,
			grammarCase{control: c, input: "0\n", want: "0"},
			grammarCase{control: c, input: "1000\n", want: "1000"},
			grammarCase{control: c, input: "1000", want: "1000"},
			grammarCase{control: c, input: "4294967294\n", want: "4294967294"},
			grammarCase{control: c, input: "4294967295\n", line: 1, field: c, kind: KindInvalidValue},
			grammarCase{control: c, input: "99999999999\n", line: 1, field: c, kind: KindInvalidValue},
			grammarCase{control: c, input: "01000\n", line: 1, field: c, kind: KindInvalidValue},
			grammarCase{control: c, input: "00\n", line: 1, field: c, kind: KindInvalidValue},
			grammarCase{control: c, input: "+1000\n", line: 1, field: c, kind: KindInvalidValue},
			grammarCase{control: c, input: "-1\n", line: 1, field: c, kind: KindInvalidValue},
			grammarCase{control: c, input: " 1000\n", line: 1, field: c, kind: KindInvalidValue},
			grammarCase{control: c, input: "root\n", line: 1, field: c, kind: KindInvalidValue},
			grammarCase{control: c, input: "\n", line: 1, field: c, kind: KindInvalidValue},
			grammarCase{control: c, input: "1000\n1001\n", line: 2, kind: KindExtraLine},
		)
	}
	runGrammarCases(t, cases)
}

func TestGroupsGrammar(t *testing.T) {
	runGrammarCases(t, []grammarCase{
		{control: "groups", input: "", want: "[]"},
		{control: "groups", input: "10\n", want: "[10]"},
		{control: "groups", input: "10\n0\n27", want: "[10 0 27]"},
		{control: "groups", input: "10\r\n27\r\n", want: "[10 27]"},
		{control: "groups", input: "10\n10\n", line: 2, field: "gid", kind: KindDuplicate},
		{control: "groups", input: "10\n\n27\n", line: 2, field: "gid", kind: KindInvalidValue},
		{control: "groups", input: "10 27\n", line: 1, field: "gid", kind: KindInvalidValue},
		{control: "groups", input: "wheel\n", line: 1, field: "gid", kind: KindInvalidValue},
		{control: "groups", input: "010\n", line: 1, field: "gid", kind: KindInvalidValue},
	})
}

func TestEnumGrammars(t *testing.T) {
	var cases []grammarCase
	enums := map[string][]string{
		"iso":      {"shared", "uid", "userns"},
		"life":     {"owned", "temp"},
		"approval": {"auto", "ask"},
		"abi":      {"argv-v1", "sdk-envelope-v1"},
	}
	bad := map[string][]string{
		"iso":      {"Shared", "none", "user", "userns ", ""},
		"life":     {"detached", "Owned", ""},
		"approval": {"never", "AUTO", ""},
		"abi":      {"argv", "sdk-envelope-v2", "argv-v1 ", ""},
	}
	for c, words := range enums {
		for _, w := range words {
			cases = append(cases,
				grammarCase{control: c, input: w + "\n", want: w},
				grammarCase{control: c, input: w, want: w},
				grammarCase{control: c, input: w + "\r\n", want: w},
				grammarCase{control: c, input: w + "\n" + w + "\n", line: 2, kind: KindExtraLine})
		}
		for _, w := range bad[c] {
			cases = append(cases, grammarCase{control: c, input: w + "\n", line: 1, field: c, kind: KindInvalidValue})
		}
	}
	runGrammarCases(t, cases)
}

func TestParentGrammar(t *testing.T) {
	runGrammarCases(t, []grammarCase{
		{control: "parent", input: "", want: `"" "" ""`},
		{control: "parent", input: "\n", want: `"" "" ""`},
		{control: "parent", input: "agent:architect\n", want: `"architect" "" ""`},
		{control: "parent", input: "agent:coder session:default run:r123\n", want: `"coder" "default" "r123"`},
		{control: "parent", input: "agent:coder session:default\n", want: `"coder" "default" ""`},
		{control: "parent", input: "agent:coder run:ctx-0123\n", want: `"coder" "" "ctx-0123"`},
		{control: "parent", input: "agent:coder\r\n", want: `"coder" "" ""`},
		{control: "parent", input: "agent:" + name64 + "\n", want: `"` + name64 + `" "" ""`},
		{control: "parent", input: "agent:" + name65 + "\n", line: 1, field: "agent", kind: KindInvalidName},
		{control: "parent", input: "agent:\n", line: 1, field: "agent", kind: KindInvalidName},
		{control: "parent", input: "architect\n", line: 1, field: "agent", kind: KindInvalidValue},
		{control: "parent", input: "session:s agent:a\n", line: 1, field: "agent", kind: KindInvalidValue},
		{control: "parent", input: "agent:a run:r session:s\n", line: 1, field: "session", kind: KindInvalidValue},
		{control: "parent", input: "agent:a session:s session:t\n", line: 1, field: "session", kind: KindInvalidValue},
		{control: "parent", input: "agent:a agent:b\n", line: 1, field: "agent", kind: KindInvalidValue},
		{control: "parent", input: "agent:a  session:s\n", line: 1, field: "", kind: KindInvalidValue},
		{control: "parent", input: "agent:a\tsession:s\n", line: 1, field: "agent", kind: KindInvalidName},
		{control: "parent", input: "agent:a \n", line: 1, field: "", kind: KindInvalidValue},
		{control: "parent", input: "agent:a session:s run:r x:y\n", line: 1, kind: KindFieldCount},
		{control: "parent", input: "agent:a host:h\n", line: 1, field: "", kind: KindInvalidValue},
		{control: "parent", input: "Agent:a\n", line: 1, field: "agent", kind: KindInvalidValue},
		{control: "parent", input: "agent:a\nagent:b\n", line: 2, kind: KindExtraLine},
		{control: "parent", input: "\n\n", line: 2, kind: KindExtraLine},
	})
	p := Parent{"coder", "default", "r1"}
	if got, err := ParseParent([]byte(p.String() + "\n")); err != nil || got != p {
		t.Errorf("round trip of %q: %+v %v", p.String(), got, err)
	}
}

func TestEnvGrammar(t *testing.T) {
	runGrammarCases(t, []grammarCase{
		{control: "env", input: "", want: `[]`},
		{control: "env", input: "A=1\nb_2=x y  z\n_=\n", want: `[{"A" "1"} {"b_2" "x y  z"} {"_" ""}]`},
		{control: "env", input: "A=$HOME/x\n", want: `[{"A" "$HOME/x"}]`},
		{control: "env", input: "A=b=c\n", want: `[{"A" "b=c"}]`},
		{control: "env", input: "A='quoted'\n", want: `[{"A" "'quoted'"}]`},
		{control: "env", input: "A=1\r\nB=2\r\n", want: `[{"A" "1"} {"B" "2"}]`},
		{control: "env", input: "A=\tx\t\n", want: `[{"A" "\tx\t"}]`},
		{control: "env", input: "ctx_lower=1\n", want: `[{"ctx_lower" "1"}]`},
		{control: "env", input: "CTX=1\n", want: `[{"CTX" "1"}]`},
		{control: "env", input: "A=1\nA=2\n", line: 2, field: "key", kind: KindDuplicate},
		{control: "env", input: "CTX_PATH=/x\n", line: 1, field: "key", kind: KindForbidden},
		{control: "env", input: "CTX_=1\n", line: 1, field: "key", kind: KindForbidden},
		{control: "env", input: "1A=x\n", line: 1, field: "key", kind: KindInvalidName},
		{control: "env", input: "A-B=x\n", line: 1, field: "key", kind: KindInvalidName},
		{control: "env", input: " A=x\n", line: 1, field: "key", kind: KindInvalidName},
		{control: "env", input: "A =x\n", line: 1, field: "key", kind: KindInvalidName},
		{control: "env", input: "export A=x\n", line: 1, field: "key", kind: KindInvalidName},
		{control: "env", input: "=x\n", line: 1, field: "key", kind: KindInvalidName},
		{control: "env", input: "A\n", line: 1, kind: KindInvalidValue},
		{control: "env", input: "A=1\n\nB=2\n", line: 2, kind: KindInvalidValue},
		{control: "env", input: "# comment\n", line: 1, kind: KindInvalidValue},
		{control: "env", input: "A=x\x00y\n", line: 1, field: "value", kind: KindInvalidValue},
	})
}

func TestPathGrammar(t *testing.T) {
	runGrammarCases(t, []grammarCase{
		{control: "path", input: "", want: `[]`},
		{control: "path", input: "/ctx/tool\n/ctx/home/1000/tool\n", want: `["/ctx/tool" "/ctx/home/1000/tool"]`},
		{control: "path", input: "/ctx/tool\r\n/ctx/shared/p/tool", want: `["/ctx/tool" "/ctx/shared/p/tool"]`},
		{control: "path", input: "/\n", want: `["/"]`},
		{control: "path", input: "/with space/tool\n", want: `["/with space/tool"]`},
		{control: "path", input: "/ctx/tool\n/ctx/tool\n", line: 2, field: "directory", kind: KindDuplicate},
		{control: "path", input: "ctx/tool\n", line: 1, field: "directory", kind: KindInvalidPath},
		{control: "path", input: "/ctx/../etc\n", line: 1, field: "directory", kind: KindInvalidPath},
		{control: "path", input: "/ctx/./tool\n", line: 1, field: "directory", kind: KindInvalidPath},
		{control: "path", input: "/ctx/tool/\n", line: 1, field: "directory", kind: KindInvalidPath},
		{control: "path", input: "/ctx//tool\n", line: 1, field: "directory", kind: KindInvalidPath},
		{control: "path", input: "/ctx/tool:/x\n", line: 1, field: "directory", kind: KindInvalidPath},
		{control: "path", input: "/ctx/t\tool\n", line: 1, field: "directory", kind: KindInvalidPath},
		{control: "path", input: "/ctx/tool\n\n", line: 2, field: "directory", kind: KindInvalidPath},
		{control: "path", input: " /ctx/tool\n", line: 1, field: "directory", kind: KindInvalidPath},
	})
}

func TestToolsGrammar(t *testing.T) {
	runGrammarCases(t, []grammarCase{
		{control: "tools", input: "", want: `[]`},
		{control: "tools", input: "fs.read\nshell.exec\n", want: `["fs.read" "shell.exec"]`},
		{control: "tools", input: name64 + "\n", want: `["` + name64 + `"]`},
		{control: "tools", input: name65 + "\n", line: 1, field: "tool", kind: KindInvalidName},
		{control: "tools", input: "fs.read", line: 1, kind: KindMissingNewline},
		{control: "tools", input: "fs.read\nfs.list", line: 2, kind: KindMissingNewline},
		{control: "tools", input: "fs.read\r\n", line: 1, field: "tool", kind: KindInvalidName},
		{control: "tools", input: "fs.read\n\nfs.list\n", line: 2, field: "tool", kind: KindInvalidName},
		{control: "tools", input: "\n", line: 1, field: "tool", kind: KindInvalidName},
		{control: "tools", input: " fs.read\n", line: 1, field: "tool", kind: KindInvalidName},
		{control: "tools", input: "fs.read \n", line: 1, field: "tool", kind: KindInvalidName},
		{control: "tools", input: "fs.read\nfs.read\n", line: 2, field: "tool", kind: KindDuplicate},
		{control: "tools", input: "FS.READ\nfs.read\n", want: `["FS.READ" "fs.read"]`},
		{control: "tools", input: "tsh\n", line: 1, field: "tool", kind: KindForbidden},
		{control: "tools", input: "fs.*\n", line: 1, field: "tool", kind: KindInvalidName},
	})
}

func TestWindowGrammar(t *testing.T) {
	runGrammarCases(t, []grammarCase{
		{control: "window", input: "auto\n", want: "auto"},
		{control: "window", input: "auto", want: "auto"},
		{control: "window", input: "1\n", want: "1"},
		{control: "window", input: "128000\n", want: "128000"},
		{control: "window", input: "4294967295\n", want: "4294967295"},
		{control: "window", input: "4294967296\n", line: 1, field: "window", kind: KindInvalidValue},
		{control: "window", input: "0\n", line: 1, field: "window", kind: KindInvalidValue},
		{control: "window", input: "0128\n", line: 1, field: "window", kind: KindInvalidValue},
		{control: "window", input: "+128\n", line: 1, field: "window", kind: KindInvalidValue},
		{control: "window", input: "-1\n", line: 1, field: "window", kind: KindInvalidValue},
		{control: "window", input: "128k\n", line: 1, field: "window", kind: KindInvalidValue},
		{control: "window", input: "Auto\n", line: 1, field: "window", kind: KindInvalidValue},
		{control: "window", input: " 128\n", line: 1, field: "window", kind: KindInvalidValue},
		{control: "window", input: "\n", line: 1, field: "window", kind: KindInvalidValue},
		{control: "window", input: "auto\n\n", line: 2, kind: KindExtraLine},
	})
}

func TestModelGrammar(t *testing.T) {
	runGrammarCases(t, []grammarCase{
		{control: "model", input: "openai/gpt-5.6\n", want: "openai/gpt-5.6"},
		{control: "model", input: "main\n", want: "main"},
		{control: "model", input: "helper", want: "helper"},
		{control: "model", input: "gpt-5.6\n", line: 1, field: "model", kind: KindInvalidName},
		{control: "model", input: "a/b/c\n", line: 1, field: "model", kind: KindInvalidName},
		{control: "model", input: "Main\n", line: 1, field: "model", kind: KindInvalidName},
		{control: "model", input: "\n", line: 1, field: "model", kind: KindInvalidName},
		{control: "model", input: "main\nhelper\n", line: 2, kind: KindExtraLine},
	})
}

func TestMountGrammar(t *testing.T) {
	runGrammarCases(t, []grammarCase{
		{control: "mount", input: "", want: ""},
		{control: "mount", input: "/ctx\t/ctx\tro\trbind,nosuid,nodev\n", want: "/ctx\t/ctx\tro\trbind,nosuid,nodev\n"},
		{control: "mount", input: "/home/me/project\t/work\trw\t-\n", want: "/home/me/project\t/work\trw\t-\n"},
		{control: "mount", input: "/a\t/b\tro\tnoexec,nodev,nosuid,bind\n", want: "/a\t/b\tro\tbind,nosuid,nodev,noexec\n"},
		{control: "mount", input: "/a\t/b\tro\tnosuid", want: "/a\t/b\tro\tnosuid\n"},
		{control: "mount", input: "/a\t/b\tro\t-\r\n\n/c\t/d\trw\trbind\r\n", want: "/a\t/b\tro\t-\n/c\t/d\trw\trbind\n"},
		{control: "mount", input: "/with space\t/x y\tro\t-\n", want: "/with space\t/x y\tro\t-\n"},
		{control: "mount", input: "/\t/host\tro\trbind\n", want: "/\t/host\tro\trbind\n"},
		// field count first
		{control: "mount", input: "/a /b ro -\n", line: 1, kind: KindFieldCount},
		{control: "mount", input: "/a\t/b\tro\n", line: 1, kind: KindFieldCount},
		{control: "mount", input: "/a\t/b\tro\t-\textra\n", line: 1, kind: KindFieldCount},
		{control: "mount", input: "/a\t\t/b\tro\t-\n", line: 1, kind: KindFieldCount},
		{control: "mount", input: "# comment\n", line: 1, kind: KindFieldCount},
		{control: "mount", input: "/a\t/b\tro\t-\n \n", line: 2, kind: KindFieldCount},
		// then paths, source before target
		{control: "mount", input: "a\t/b\tro\t-\n", line: 1, field: "source", kind: KindInvalidPath},
		{control: "mount", input: "/a\tb\tro\t-\n", line: 1, field: "target", kind: KindInvalidPath},
		{control: "mount", input: "/a/../etc\t/b\tro\t-\n", line: 1, field: "source", kind: KindInvalidPath},
		{control: "mount", input: "/a\t/b/.\tro\t-\n", line: 1, field: "target", kind: KindInvalidPath},
		{control: "mount", input: "/a/\t/b\tro\t-\n", line: 1, field: "source", kind: KindInvalidPath},
		{control: "mount", input: "/a\x1b[2J\t/b\tro\t-\n", line: 1, field: "source", kind: KindInvalidPath},
		{control: "mount", input: "\t/b\tro\t-\n", line: 1, field: "source", kind: KindInvalidPath},
		{control: "mount", input: "a\tb\tRW\tfoo\n", line: 1, field: "source", kind: KindInvalidPath}, // path before mode before option
		// then mode
		{control: "mount", input: "/a\t/b\tRO\t-\n", line: 1, field: "mode", kind: KindInvalidMode},
		{control: "mount", input: "/a\t/b\trx\tfoo\n", line: 1, field: "mode", kind: KindInvalidMode}, // mode before option
		{control: "mount", input: "/a\t/b\t\t-\n", line: 1, field: "mode", kind: KindInvalidMode},
		// then options
		{control: "mount", input: "/a\t/b\tro\t\n", line: 1, field: "options", kind: KindInvalidOption},
		{control: "mount", input: "/a\t/b\tro\tbind,rbind\n", line: 1, field: "options", kind: KindInvalidOption},
		{control: "mount", input: "/a\t/b\tro\trbind,bind\n", line: 1, field: "options", kind: KindInvalidOption},
		{control: "mount", input: "/a\t/b\tro\tnosuid,nosuid\n", line: 1, field: "options", kind: KindDuplicate},
		{control: "mount", input: "/a\t/b\tro\tbind,bind\n", line: 1, field: "options", kind: KindDuplicate},
		{control: "mount", input: "/a\t/b\tro\t-,nosuid\n", line: 1, field: "options", kind: KindInvalidOption},
		{control: "mount", input: "/a\t/b\tro\t-,-\n", line: 1, field: "options", kind: KindInvalidOption},
		{control: "mount", input: "/a\t/b\tro\tnosuid,\n", line: 1, field: "options", kind: KindInvalidOption},
		{control: "mount", input: "/a\t/b\tro\tnosuid nodev\n", line: 1, field: "options", kind: KindInvalidOption},
		{control: "mount", input: "/a\t/b\tro\tNOSUID\n", line: 1, field: "options", kind: KindInvalidOption},
		{control: "mount", input: "/a\t/b\tro\tsuid\n", line: 1, field: "options", kind: KindInvalidOption},
		{control: "mount", input: "/a\t/b\tro\tremount\n", line: 1, field: "options", kind: KindInvalidOption},
		// then duplicate targets across lines
		{control: "mount", input: "/a\t/b\tro\t-\n/c\t/b\trw\t-\n", line: 2, field: "target", kind: KindDuplicate},
	})
}

func TestPathControlGrammar(t *testing.T) {
	var cases []grammarCase
	for _, c := range []string{"root", "cwd"} {
		cases = append(cases,
			grammarCase{control: c, input: "/workspace\n", want: "/workspace"},
			grammarCase{control: c, input: "/", want: "/"},
			grammarCase{control: c, input: "/a b\r\n", want: "/a b"},
			grammarCase{control: c, input: "\n", line: 1, field: c, kind: KindInvalidPath},
			grammarCase{control: c, input: "workspace\n", line: 1, field: c, kind: KindInvalidPath},
			grammarCase{control: c, input: "/a/../b\n", line: 1, field: c, kind: KindInvalidPath},
			grammarCase{control: c, input: "/a/\n", line: 1, field: c, kind: KindInvalidPath},
			grammarCase{control: c, input: "/a\n/b\n", line: 2, kind: KindExtraLine},
		)
	}
	runGrammarCases(t, cases)
}

func TestSingleValueControlsRefuseExtraLines(t *testing.T) {
	for control, valid := range map[string]string{
		"label": "a", "perm": "rwx", "uid": "1", "gid": "1", "owner": "1", "iso": "uid", "life": "temp",
		"approval": "ask", "abi": "argv-v1", "window": "auto", "model": "main", "parent": "agent:a",
		"root": "/r", "cwd": "/w",
	} {
		for _, input := range []string{valid + "\n" + valid + "\n", valid + "\n\n", valid + "\r\n\r\n", valid + "\nx"} {
			_, err := parseAny(control, []byte(input))
			var ce *ControlError
			if !errors.As(err, &ce) || ce.Kind != KindExtraLine || ce.Line != 2 || ce.Control != control {
				t.Errorf("%s %q: %v, want an extra-line error at line 2", control, input, err)
			}
		}
	}
}

func TestErrorMessagesAreOneSafeLine(t *testing.T) {
	// A hostile value (escape sequences, newlines, a huge line) must come
	// back quoted and bounded in the message.
	evil := "\x1b]0;pwned\x07" + strings.Repeat("A", 5000)
	for _, control := range []string{"label", "perm", "uid", "iso", "window", "model", "parent", "path", "tools", "env", "mount", "groups"} {
		_, err := parseAny(control, []byte(evil+"\n"))
		if err == nil {
			t.Errorf("%s accepted hostile input", control)
			continue
		}
		msg := err.Error()
		if strings.ContainsAny(msg, "\x1b\x07\n") || len(msg) > 400 {
			t.Errorf("%s: unsafe message (%d bytes): %q", control, len(msg), msg)
		}
	}
}
