package tsh

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const notFoundNope = "tsh: tool not found in CTX_PATH: nope\ntry: tools\n"

func TestWhichTypeCommand(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "fs.read", "exit 0")
	f.script(t, f.user, "fs.read", "exit 0")
	f.script(t, f.user, "mine", "exit 0")
	f.script(t, f.sys, "help", "exit 0") // shadowed by the builtin
	sys, user := f.sys, f.user

	f.tsh(t, nil, "", "which", "fs.read", "mine").check(t, 0, sys+"/fs.read\n"+user+"/mine\n", "")
	f.tsh(t, nil, "", "which", "nope").check(t, 1, "", notFoundNope)
	f.tsh(t, nil, "", "which", "fs.read", "nope", "mine").check(t, 1, sys+"/fs.read\n"+user+"/mine\n", notFoundNope)
	f.tsh(t, nil, "", "which").check(t, 2, "", "tsh: usage: which TOOL...\n")
	f.tsh(t, nil, "", "type", "load", "fs.read", "help").check(t, 0,
		"load is a tsh builtin\nfs.read is "+sys+"/fs.read\nhelp is a tsh builtin\n", "")
	f.tsh(t, nil, "", "type", "nope").check(t, 1, "", notFoundNope)
	f.tsh(t, nil, "", "command", "-v", "exit", "mine", "nope").check(t, 1, "exit\n"+user+"/mine\n", "")
	f.tsh(t, nil, "", "command", "-v").check(t, 2, "", "tsh: usage: command [-v] NAME [ARG...]\n")
	// Running a missing or impossible tool.
	f.tsh(t, nil, "", "nope", "x").check(t, 127, "", notFoundNope)
	f.tsh(t, nil, "", "../tool/fs.read").check(t, 127, "",
		`tsh: invalid name "../tool/fs.read": must start with a letter or digit (tsh runs only tools found by name through CTX_PATH)`+"\n")
	f.tsh(t, nil, "", "x/y").check(t, 127, "",
		`tsh: invalid name "x/y": byte 1 ('/') is not one of A-Z a-z 0-9 . _ + - (tsh runs only tools found by name through CTX_PATH)`+"\n")
	// `command NAME` runs the tool a builtin shadows (here: refused for
	// lack of an agent context, which shows it reached the tool).
	r := f.tsh(t, nil, "", "command", "help")
	if r.code != 69 || !strings.Contains(r.stderr, "cannot execute help: no agent context") {
		t.Errorf("command help: %+v", r)
	}
}

func TestToolsListing(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "fs.read", "")
	f.script(t, f.sys, "fs.list", "")
	f.script(t, f.sys, "bash", "")
	f.script(t, f.user, "fs.read", "") // shadowed
	f.script(t, f.user, "fsx", "")
	os.WriteFile(filepath.Join(f.sys, "notexec"), nil, 0o644)
	f.control(t, f.sys, "fs.read", "description", "Read a file.\nSecond line.\n")
	f.control(t, f.sys, "fs.list", "description", "List \x1b[31mred\x1b[0m\n")

	f.tsh(t, nil, "", "tools").check(t, 0, "bash\nfs.list\nfs.read\nfsx\n", "")
	f.tsh(t, nil, "", "--list").check(t, 0, "bash\nfs.list\nfs.read\nfsx\n", "")
	f.tsh(t, nil, "", "tools", "fs").check(t, 0, "fs.list\nfs.read\n", "")
	f.tsh(t, nil, "", "tools", "fsx").check(t, 0, "fsx\n", "")
	f.tsh(t, nil, "", "tools", "-l", "fs").check(t, 0,
		"fs.list\t"+f.sys+"/fs.list\tList \\x1b[31mred\\x1b[0m\n"+
			"fs.read\t"+f.sys+"/fs.read\tRead a file.\n", "")
	f.tsh(t, nil, "", "tools", "-x").check(t, 2, "", "tsh: tools: unknown option -x\ntsh: usage: tools [-l|--long] [GROUP]\n")
	f.tsh(t, nil, "", "--list", "x").check(t, 2, "", "tsh: --list takes no command\n")
}

func TestToolHelp(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "fs.read", "touch "+filepath.Join(f.root.Dir, "ran"))
	f.control(t, f.sys, "fs.read", "description", "Read one file.\nBounded: 1 MiB.\n")
	f.control(t, f.sys, "fs.read", "schema", `{"title":"fs.read input","description":"a \u001b]0;pwned\u0007 path","required":["path"],"type":"object"}`)
	want := "fs.read\t" + f.sys + "/fs.read\n" +
		"description: Read one file.\n  Bounded: 1 MiB.\n" +
		"schema: fs.read input\n" +
		"schema description: a \\x1b]0;pwned\\a path\n" +
		"required: path\n"
	f.tsh(t, nil, "", "help", "fs.read").check(t, 0, want, "")
	f.tsh(t, nil, "", "fs.read", "--help").check(t, 0, want, "")
	f.tsh(t, map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1"}, "", "fs.read", "-h").check(t, 0, want, "")
	if exists(filepath.Join(f.root.Dir, "ran")) {
		t.Fatal("--help ran the tool")
	}
	// --help among other arguments is the tool's business.
	if r := f.tsh(t, nil, "", "fs.read", "--help", "x"); r.code != 69 {
		t.Errorf("fs.read --help x: %+v", r)
	}
	f.tsh(t, nil, "", "help", "which").check(t, 0, "which TOOL...\n  print the path each TOOL resolves to\n", "")
	r := f.tsh(t, nil, "", "help")
	if r.code != 0 || !strings.Contains(r.stdout, "  pin TOOL...") || !strings.Contains(r.stdout, "TOOL [ARG...]") {
		t.Errorf("help: %+v", r)
	}
	// A bad schema is reported, naming the file.
	f.script(t, f.sys, "bad", "")
	f.control(t, f.sys, "bad", "schema", `[1,2]`)
	r = f.tsh(t, nil, "", "help", "bad")
	if r.code != 1 || !strings.Contains(r.stderr, "bad.d/schema: invalid schema") {
		t.Errorf("help bad: %+v", r)
	}
	// A symlinked control directory is not followed.
	f.script(t, f.sys, "linked", "")
	os.Symlink(filepath.Join(f.sys, "fs.read.d"), filepath.Join(f.sys, "linked.d"))
	r = f.tsh(t, nil, "", "help", "linked")
	if r.code != 1 || !strings.Contains(r.stderr, "linked.d: is a symlink") {
		t.Errorf("help linked: %+v", r)
	}
}

func TestContextBuiltinsREPL(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		f.script(t, f.sys, n, "")
	}
	f.control(t, f.sys, "b", "description", "tool b\n")
	os.MkdirAll(filepath.Join(f.sys, "tsh.d"), 0o755)
	os.WriteFile(filepath.Join(f.sys, "tsh.d", "config"), []byte("# small\nmax_loaded_tools=2\n"), 0o644)
	s := f.sys
	script := strings.Join([]string{
		"load a", "load b", "pin c", "load d", // a goes: a, b, d unpinned > 2
		"loads", "pins",
		"unload c", "unpin c", // unpinning c makes 3 unpinned: b (oldest) goes
		"loads",
		"unload d", "unload d", "unpin nope", "load nope", "loads",
	}, "\n") + "\n"
	wantOut := "loaded a\t" + s + "/a\tmetadata\n" +
		"loaded b\t" + s + "/b\tmetadata\n" +
		"pinned metadata c\t" + s + "/c\n" +
		"loaded d\t" + s + "/d\tmetadata\n" +
		"auto-unloaded a\tcontext-limit\n" +
		"b\t" + s + "/b\tmetadata\ttool b\n" +
		"c\t" + s + "/c\tpinned\n" +
		"d\t" + s + "/d\tmetadata\n" +
		"c\t" + s + "/c\tpinned\n" +
		"unpinned c\t" + s + "/c\n" +
		"auto-unloaded b\tcontext-limit\n" +
		"c\t" + s + "/c\tmetadata\n" +
		"d\t" + s + "/d\tmetadata\n" +
		"unloaded d\t" + s + "/d\n" +
		"c\t" + s + "/c\tmetadata\n"
	wantErr := "tsh: c is pinned; run `unpin c` before unload\n" +
		"tsh: d is not loaded\n" +
		"tsh: nope is not loaded\n" +
		notFoundNope
	f.tsh(t, nil, script).check(t, 0, wantOut, wantErr)
}

func TestREPLErrorsContinue(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "x", "")
	x := f.sys + "/x"
	f.tsh(t, nil, "which \"x\nwhich x\nwhich 'x\nwhich x\\\n\n   \nwhich x # |\n").check(t, 1,
		x+"\n"+x+"\n",
		"tsh: unterminated double quote\ntsh: unterminated single quote\ntsh: trailing backslash\n"+
			"tsh: invalid name \"#\": must start with a letter or digit (tsh runs only tools found by name through CTX_PATH)\n"+
			"tsh: invalid name \"|\": must start with a letter or digit (tsh runs only tools found by name through CTX_PATH)\n")
	// exit: explicit code, bad code (the REPL goes on), default = last status.
	f.tsh(t, nil, "exit 256\nexit -1\nexit 07\nexit 1 2\nexit 7\nwhich x\n").check(t, 7, "",
		"tsh: exit: code must be 0..255, not \"256\"\ntsh: exit: code must be 0..255, not \"-1\"\n"+
			"tsh: exit: code must be 0..255, not \"07\"\ntsh: usage: exit [CODE]\n")
	f.tsh(t, nil, "which nope\nquit\n").check(t, 1, "", notFoundNope)
	f.tsh(t, nil, "which nope\nwhich x").check(t, 0, x+"\n", notFoundNope) // last line without newline
	f.tsh(t, nil, "").check(t, 0, "", "")
	f.tsh(t, nil, "", "exit", "3").check(t, 3, "", "")
	// A line over 1 MiB is refused whole; the next line runs.
	long := strings.Repeat("y", MaxLine+10)
	f.tsh(t, nil, "which "+long+"\nwhich x\n").check(t, 0, x+"\n", "tsh: line longer than 1 MiB\n")
}

func TestOptionsAndToolCallForm(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "x", "")
	x := f.sys + "/x"
	f.tsh(t, nil, "", "--bogus").check(t, 2, "", "tsh: unknown option --bogus (see \"tsh --help\")\n")
	f.tsh(t, nil, "", "--root").check(t, 2, "", "tsh: option --root needs a directory (see \"tsh --help\")\n")
	f.tsh(t, nil, "", "--", "which", "x").check(t, 0, x+"\n", "")
	// Options after the command word belong to the command.
	f.tsh(t, nil, "", "which", "--root", "x").check(t, 1, x+"\n",
		"tsh: invalid name \"--root\": must start with a letter or digit (tsh runs only tools found by name through CTX_PATH)\n")
	// -r and --root= spell the same option; the tool-call form takes words.
	var out strings.Builder
	e := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Getenv: func(k string) string {
		return map[string]string{"CTX_ROOT": f.root.Dir}[k]
	}}
	for _, args := range [][]string{{"-r", f.root.Dir, "which", "x"}, {"--root=" + f.root.Dir, "which", "x"}, {`{"args":["which","x"],"extra":1}`}} {
		out.Reset()
		if code := Run(e, args); code != 0 || out.String() != x+"\n" {
			t.Errorf("Run(%q) = %d, %q", args, code, out.String())
		}
	}
	for _, bad := range []string{`{"args":[]}`, `{"args":"which"}`, `{}`, `{"args":[1]}`, `{`} {
		out.Reset()
		if code := Run(e, []string{bad}); code != 2 || !strings.HasPrefix(out.String(), "tsh: invalid tool input") {
			t.Errorf("Run(%s) = %d, %q", bad, code, out.String())
		}
	}
}

func TestBadConfig(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "x", "")
	cfg := filepath.Join(f.sys, "tsh.d", "config")
	os.MkdirAll(filepath.Dir(cfg), 0o755)
	os.WriteFile(cfg, []byte("max_loaded_tools=64\n\nwindow_percent=0\n"), 0o644)
	f.tsh(t, nil, "", "which", "x").check(t, 2, "", "tsh: "+cfg+": line 3: window_percent: \"0\" is not a positive integer without leading zeros\n")
	os.Remove(cfg)
	os.Symlink("/etc/hostname", cfg)
	f.tsh(t, nil, "", "which", "x").check(t, 2, "", "tsh: open "+cfg+": is a symlink (not followed)\n")
}

func TestExecutionRefusedWithoutAgentContext(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(f.root.Dir, "marker")
	f.script(t, f.sys, "fs.write", "touch "+marker)
	// Even with an authorizer that would allow it: no context, no exec.
	f.authorize = allowAll
	refusal := "tsh: cannot execute fs.write: no agent context; run it inside an agent sandbox (ctx agent start --root " + f.root.Dir + " AGENT) or join one with ctx agent attach --root " + f.root.Dir + " AGENT\n"
	f.tsh(t, map[string]string{"CTX_PATH": f.sys}, "", "fs.write", "x").check(t, 69, "", refusal)
	f.tsh(t, nil, "fs.write\nexit\n").check(t, 69, "", refusal)
	if exists(marker) {
		t.Fatal("the tool ran without an agent context")
	}
}

// writeAgent defines agent coder under the fixture root with the given
// perm, policy and path, as bootstrap would.
func (f *fixture) writeAgent(t *testing.T, perm, pol string) {
	t.Helper()
	d := f.root.AgentControl("coder")
	uid := strconv.Itoa(os.Getuid())
	for name, v := range map[string]string{"label": "coder_t\n", "perm": perm + "\n", "uid": uid + "\n",
		"gid": strconv.Itoa(os.Getgid()) + "\n", "policy": pol, "path": f.sys + "\n" + f.user + "\n"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExecutionThroughTheAuthorityCheck runs the production authorizer
// against a real agent definition: each refusing layer stops the tool
// before it runs, and a tool that passes every layer runs.
func TestExecutionThroughTheAuthorityCheck(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(f.root.Dir, "marker")
	f.script(t, f.sys, "shell.exec", "touch "+marker)
	agent := map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1", "CTX_ROOT": f.root.Dir, "CTX_PATH": f.sys}

	// No definition of the agent at all: the context cannot be established.
	f.tsh(t, agent, "", "shell.exec", "pwd").check(t, 13, "", "ctx: denied: tsh: cannot execute shell.exec: EACCES (agent-context)\n")

	f.writeAgent(t, "r--", "allow coder_t tool:shell.exec execute\n")
	f.tsh(t, agent, "", "shell.exec", "pwd").check(t, 13, "", "ctx: denied: tsh: cannot execute shell.exec: EACCES (perm)\n")
	f.writeAgent(t, "rwx", "")
	f.tsh(t, agent, "shell.exec x\nexit\n").check(t, 13, "", "ctx: denied: tsh: cannot execute shell.exec: EACCES (agent-policy)\n")
	f.writeAgent(t, "rwx", "allow coder_t tool:shell.exec execute\n")
	f.tsh(t, agent, "", "shell.exec").check(t, 13, "", "ctx: denied: tsh: cannot execute shell.exec: EACCES (tool-policy)\n")
	if exists(marker) {
		t.Fatal("a tool refused by the authority check ran")
	}

	f.control(t, f.sys, "shell.exec", "policy", "allow coder_t tool:shell.exec execute\n")
	f.tsh(t, agent, "", "shell.exec").check(t, 0, "", "")
	if !exists(marker) {
		t.Fatal("a tool allowed by every layer did not run")
	}
}

func TestAgentContextDetection(t *testing.T) {
	old := identityFile
	t.Cleanup(func() { identityFile = old })
	identityFile = filepath.Join(t.TempDir(), "identity")
	none := &Env{Getenv: func(string) string { return "" }}
	if agentContext(none) {
		t.Fatal("agent context without CTX_AGENT or identity")
	}
	if !agentContext(&Env{Getenv: func(k string) string {
		return map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1"}[k]
	}}) {
		t.Fatal("CTX_AGENT not detected")
	}
	os.WriteFile(identityFile, []byte("agent=coder\n"), 0o444)
	if !agentContext(none) {
		t.Fatal("identity file not detected")
	}
}
