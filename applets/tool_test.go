package applets

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func testEnv(stdin string, env map[string]string) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Env{Name: "test", Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] }}, &out, &errb
}

func TestReadToolInput(t *testing.T) {
	cases := []struct {
		tool  *builtinTool
		args  []string
		stdin string
		want  string // a field=value to check, or "" for an error
	}{
		{fsReadTool, []string{`{"path":"a"}`}, "", "path=a"},
		{fsReadTool, []string{"a b"}, "", "path=a b"},
		{fsReadTool, nil, `{"path":"x"}`, "path=x"},
		{fsReadTool, nil, "x\n", "path=x"},
		{fsReadTool, nil, "", ""},
		{fsReadTool, []string{"a", "b"}, "", ""},
		{fsReadTool, []string{`{"path":"a"} {}`}, "", ""},
		{fsReadTool, []string{`{"path":`}, "", ""},
		{fsReadTool, []string{`{}`}, "", "path=<nil>"},
		{shellExecTool, []string{"echo", "hi"}, "", "cmd=echo hi"},
		{shellExecTool, nil, "pwd\n", "cmd=pwd"},
		{fsWriteTool, []string{"f", "hello", "world"}, "", "content=hello world"},
		{fsWriteTool, []string{"f"}, "from stdin\n", "content=from stdin\n"},
		{fsReplaceTool, []string{"f", "a"}, "", ""},
		{fsListTool, nil, "", "path=."},
		{fsListTool, []string{"null"}, "", "path=null"},
	}
	for _, c := range cases {
		e, _, _ := testEnv(c.stdin, nil)
		in, _, err := readToolInput(e, c.tool, c.args)
		if c.want == "" {
			if err == nil {
				t.Errorf("%s %q stdin %q: got %v, want an error", c.tool.Name, c.args, c.stdin, in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %q stdin %q: %v", c.tool.Name, c.args, c.stdin, err)
			continue
		}
		k, v, _ := strings.Cut(c.want, "=")
		got := "<nil>"
		if s, ok := in[k]; ok {
			got = s.(string)
		}
		if got != v {
			t.Errorf("%s %q stdin %q: %s=%q, want %q", c.tool.Name, c.args, c.stdin, k, got, v)
		}
	}
}

// FuzzToolInput feeds arbitrary argv and stdin to the input reader: it must
// return an object or an error, never panic, and never accept a non-object.
func FuzzToolInput(f *testing.F) {
	f.Add(`{"path":"a"}`, "")
	f.Add("", `{"cmd":"x"}`)
	f.Add("[1,2]", "")
	f.Add("", "{\"a\":1}\n{")
	f.Add(`{"path":"\u0000"}`, "")
	f.Fuzz(func(t *testing.T, arg, stdin string) {
		var args []string
		if arg != "" {
			args = []string{arg}
		}
		for _, tool := range []*builtinTool{fsReadTool, shellExecTool, fsWriteTool} {
			e, _, _ := testEnv(stdin, nil)
			in, _, err := readToolInput(e, tool, args)
			if err == nil && in == nil {
				t.Fatalf("%s: nil input without error", tool.Name)
			}
		}
	})
}

// TestRunToolInProcess checks which tools tsh may run without a process:
// the builtin tools with their own code here, not the interactive ones and
// not the tools with an applet of their own.
func TestRunToolInProcess(t *testing.T) {
	dir := t.TempDir()
	f := dir + "/f.txt"
	os.WriteFile(f, []byte("in-process\n"), 0o644)
	var out, errb bytes.Buffer
	code, ok := runToolInProcess("fs.read", "/nonexistent/fs.read", []string{f}, []string{"CTX_TOOL_MODE=cli"}, strings.NewReader(""), &out, &errb)
	if !ok || code != 0 || out.String() != "in-process\n" {
		t.Fatalf("fs.read in-process: ok=%v code=%d out=%q err=%q", ok, code, out.String(), errb.String())
	}
	for _, name := range []string{"bash", "tmux", "tsh", "tsh.config", "no.such.tool"} {
		if _, ok := runToolInProcess(name, "/x/"+name, nil, nil, strings.NewReader(""), &out, &errb); ok {
			t.Errorf("%s ran in-process", name)
		}
	}
}
