package tsh

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctx/fsops"
)

// These tests exercise the exec mechanics with the test-only allowing
// authorizer, since the production one refuses everything until the
// authority check is wired in.

func TestExecArgvEnvDescriptors(t *testing.T) {
	f := newFixture(t)
	f.authorize = allowAll
	probe := f.probe(t, f.sys)

	// A descriptor standing for the run capability, above stderr.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	runFD := int(w.Fd())
	pipeName, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(runFD))

	env := map[string]string{
		"CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "coder_t", "CTX_SESSION": "default",
		"CTX_RUN_ID": "ctx-0123", "CTX_RUN_FD": strconv.Itoa(runFD), "CTX_HOME": f.home,
		"CTX_PATH": f.sys, "HOME": "/home/agent", "USER": "agent", "LOGNAME": "agent",
		"SHELL": "/bin/sh", "TERM": "xterm", "LANG": "C.UTF-8",
		// Not passed on:
		"FOO": "bar", "LD_PRELOAD": "/evil.so", "PATH": "/evil", "CTX_TOOL_MODE": "native",
		"CTX_AUTHORIZED_OBJECT": "/ctx/tool/shell.exec", "CTX_ROOT": "/elsewhere",
	}
	res := f.tsh(t, env, "", "tsh-probe", "a", "b c", "", "--root", "|")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("probe: %+v", res)
	}
	var rep probeReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("probe output %q: %v", res.stdout, err)
	}
	if want := []string{"tsh-probe", "a", "b c", "", "--root", "|"}; !reflect.DeepEqual(rep.Argv, want) {
		t.Errorf("argv = %q, want %q", rep.Argv, want)
	}
	wantEnv := []string{
		"CTX_AGENT=coder", "CTX_AGENT_SUBJECT=coder_t", "CTX_AUTHORIZED_OBJECT=" + probe,
		"CTX_HOME=" + f.home, "CTX_PATH=" + f.sys, "CTX_ROOT=" + f.root.Dir,
		"CTX_RUN_FD=" + strconv.Itoa(runFD), "CTX_RUN_ID=ctx-0123", "CTX_SESSION=default",
		"CTX_TOOL_MODE=cli", "HOME=/home/agent", "LANG=C.UTF-8", "LOGNAME=agent",
		"PATH=/usr/bin:/bin", "SHELL=/bin/sh", "TERM=xterm", "USER=agent",
	}
	if !reflect.DeepEqual(rep.Env, wantEnv) {
		t.Errorf("env =\n%q\nwant\n%q", rep.Env, wantEnv)
	}
	if got := rep.FDs[strconv.Itoa(runFD)]; got != pipeName {
		t.Errorf("CTX_RUN_FD %d in the tool is %q, want the run capability %q (fds %v)", runFD, got, pipeName, rep.FDs)
	}
	if rep.Exe != probe {
		t.Errorf("tool executable = %q, want %q", rep.Exe, probe)
	}

	// Empty argv is passed as is; a closed CTX_RUN_FD is not passed on.
	env = map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1", "CTX_RUN_FD": "999"}
	res = f.tsh(t, env, "", "tsh-probe")
	rep = probeReport{}
	json.Unmarshal([]byte(res.stdout), &rep)
	if res.code != 0 || !reflect.DeepEqual(rep.Argv, []string{"tsh-probe"}) {
		t.Errorf("empty argv: %+v, %q", res, rep.Argv)
	}
	for _, kv := range rep.Env {
		if strings.HasPrefix(kv, "CTX_RUN_FD=") {
			t.Errorf("closed CTX_RUN_FD passed on: %s", kv)
		}
		if kv == "CTX_PATH="+f.sys+":"+f.user {
			continue
		}
		if strings.HasPrefix(kv, "CTX_PATH=") {
			t.Errorf("without a process CTX_PATH the tool gets the default one, got %s", kv)
		}
	}
}

func TestExecExitCodesAndSignals(t *testing.T) {
	f := newFixture(t)
	f.authorize = allowAll
	agent := map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1"}
	f.script(t, f.sys, "code", `exit "$1"`)
	f.script(t, f.sys, "killself", `kill -"$1" $$; sleep 5`)
	f.script(t, f.sys, "echoer", `printf '%s|' "$@"; cat`)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"code", "0"}, 0},
		{[]string{"code", "42"}, 42},
		{[]string{"code", "255"}, 255},
		{[]string{"killself", "TERM"}, 128 + int(syscall.SIGTERM)},
		{[]string{"killself", "KILL"}, 128 + int(syscall.SIGKILL)},
		{[]string{"killself", "INT"}, 128 + int(syscall.SIGINT)},
	} {
		if r := f.tsh(t, agent, "", tc.args...); r.code != tc.code || r.stderr != "" {
			t.Errorf("%q: exit %d (stderr %q), want %d", tc.args, r.code, r.stderr, tc.code)
		}
	}
	// Executable bit but not a program: 126, the errno named.
	os.WriteFile(filepath.Join(f.sys, "garbage"), []byte("\x00\x01 not a program"), 0o755)
	f.tsh(t, agent, "", "garbage").check(t, 126, "", "tsh: cannot execute garbage: ENOEXEC\n")
	// A script whose #! interpreter is not there: 127, as a shell says
	// (proc.StartFailure), though the tool itself was found.
	os.WriteFile(filepath.Join(f.sys, "nointerp"), []byte("#!/no/such/interpreter\n"), 0o755)
	f.tsh(t, agent, "", "nointerp").check(t, 127, "", "tsh: cannot execute nointerp: ENOENT\n")
	// Plain output, inherited stdio: arguments and stdin reach the tool.
	f.tsh(t, agent, "from stdin", "echoer", "a b", "").check(t, 0, "a b||from stdin", "")
	// In the REPL a tool's status is the REPL's last status.
	f.tsh(t, agent, "code 9\n").check(t, 9, "", "")
}

func TestExecExecuteOnlyBinary(t *testing.T) {
	f := newFixture(t)
	f.authorize = allowAll
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true")
	}
	p := filepath.Join(f.sys, "true")
	os.WriteFile(p, b, 0o111)
	os.Chmod(p, 0o111)
	f.tsh(t, map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1"}, "", "true").check(t, 0, "", "")
}

// The executable run is the inode that was looked up (and authorized):
// replacing it or swapping in a symlink afterwards is refused.
func TestExecRefusesChangedExecutable(t *testing.T) {
	f := newFixture(t)
	f.authorize = allowAll
	marker := filepath.Join(f.root.Dir, "marker")
	p := f.script(t, f.sys, "tool", "exit 0")
	sh, _ := NewShell(&Env{Getenv: func(string) string { return "" }, Stdout: &strings.Builder{}, Stderr: &strings.Builder{}, authorize: f.authorize}, f.root)
	errs := &strings.Builder{}
	sh.env.Stderr = errs

	hit, err := fsops.LookupTool(sh.dirs, "tool")
	if err != nil {
		t.Fatal(err)
	}
	// Replaced by another file (rename over it: a new inode).
	tmp := filepath.Join(f.sys, ".new")
	os.WriteFile(tmp, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
	os.Rename(tmp, p)
	if code := sh.execTool(hit, nil); code != 126 || !strings.Contains(errs.String(), "changed after lookup") {
		t.Errorf("replaced executable: exit %d, %q", code, errs.String())
	}
	// Replaced by a symlink. (O_PATH|O_NOFOLLOW opens the link itself,
	// which is not the regular file that was looked up.)
	os.Remove(p)
	orig := f.script(t, f.root.Dir, "orig", "touch "+marker)
	os.Symlink(orig, p)
	errs.Reset()
	if code := sh.execTool(hit, nil); code != 126 || !strings.Contains(errs.String(), "changed after lookup") {
		t.Errorf("symlink swap: exit %d, %q", code, errs.String())
	}
	if exists(marker) {
		t.Fatal("a substituted executable ran")
	}
}

// The path cache is revalidated: a replaced file, a tool added to an
// earlier tier or a removed tool is seen at once.
func TestResolveRevalidatesCache(t *testing.T) {
	f := newFixture(t)
	p := f.script(t, f.user, "t", "")
	sh, code := NewShell(&Env{Getenv: func(string) string { return "" }}, f.root)
	if sh == nil {
		t.Fatalf("NewShell: %d", code)
	}
	ino := func(h fsops.ToolHit) uint64 { return h.Info.Sys().(*syscall.Stat_t).Ino }

	h1, err := sh.resolve("t")
	if err != nil || h1.Path != p {
		t.Fatalf("resolve: %+v, %v", h1, err)
	}
	if c, ok := sh.cache.Peek("t"); !ok || c.tier != 1 {
		t.Fatalf("not cached: %+v", c)
	}
	if h, _ := sh.resolve("t"); ino(h) != ino(h1) || sh.cache.freq["t"] != 2 {
		t.Fatalf("cache hit not used")
	}
	tmp := filepath.Join(f.user, ".n")
	os.WriteFile(tmp, []byte("#!/bin/sh\n"), 0o755)
	os.Rename(tmp, p)
	h2, err := sh.resolve("t")
	if err != nil || ino(h2) == ino(h1) {
		t.Fatalf("replaced file not seen: %+v, %v", h2, err)
	}
	os.Chmod(p, 0o644)
	if _, err := sh.resolve("t"); err == nil {
		t.Fatal("non-executable file still resolved")
	}
	os.Chmod(p, 0o755)
	f.script(t, f.sys, "t", "")
	if h, err := sh.resolve("t"); err != nil || h.Path != filepath.Join(f.sys, "t") {
		t.Fatalf("tool added to an earlier tier not seen: %+v, %v", h, err)
	}
	os.Remove(filepath.Join(f.sys, "t"))
	os.Remove(p)
	if _, err := sh.resolve("t"); err == nil {
		t.Fatal("removed tool still resolved")
	}
	if _, ok := sh.cache.Peek("t"); ok {
		t.Fatal("stale entry kept")
	}
}

// In the REPL reading from a pipe, tsh reads its command line byte by byte,
// so a tool given arguments that shares stdin finds the rest of the input
// unread; a tool given none gets an empty stdin and the script goes on.
func TestREPLSharesStdinWithTools(t *testing.T) {
	f := newFixture(t)
	f.authorize = allowAll
	f.script(t, f.sys, "readone", `read line; echo "tool $1 got: $line"`)
	r, w, _ := os.Pipe()
	w.WriteString("readone a\nfor the tool\nreadone\nwhich readone\n")
	w.Close()
	defer r.Close()
	var out, errb strings.Builder
	// A tool's stdout must be a file for the output order to be exact.
	outF, _ := os.CreateTemp(t.TempDir(), "out")
	defer outF.Close()
	e := &Env{Stdin: r, Stdout: outF, Stderr: &errb, Getenv: func(k string) string {
		return map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1"}[k]
	}, authorize: f.authorize}
	code := Run(e, []string{"--root", f.root.Dir})
	out.WriteString(readFile(t, outF.Name()))
	want := "tool a got: for the tool\ntool  got: \n" + f.sys + "/readone\n"
	if code != 0 || out.String() != want || errb.String() != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want %q", code, out.String(), errb.String(), want)
	}
}

// fs.read/fs.write/shell.exec with no arguments in the REPL are not run,
// on a terminal (they would wait) or from a pipe (they would read the
// script); the lines after them still run.
func TestNeedsInputInREPL(t *testing.T) {
	f := newFixture(t)
	f.authorize = allowAll
	marker := filepath.Join(f.root.Dir, "ran")
	f.script(t, f.sys, "fs.read", "touch "+marker)
	f.tsh(t, map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1"}, "fs.read\nwhich fs.read\n").check(t, 0,
		f.sys+"/fs.read\n", "tsh: fs.read needs input; pass it as arguments: stdin is the rest of this script (see: help fs.read)\n")
	if exists(marker) {
		t.Fatal("fs.read with empty argv ran in a piped REPL")
	}
}

// BenchmarkOneShotOverhead compares `tsh TOOL` (in-process: options,
// config, CTX_PATH choice, lookup, open, fd exec, wait) with executing the
// same tool directly, in the same loop, and reports the ratio.
func BenchmarkOneShotOverhead(b *testing.B) {
	dir := b.TempDir()
	root := fsops.Root{Dir: dir}
	os.MkdirAll(root.ToolDir(), 0o755)
	bin, err := os.ReadFile("/bin/true")
	if err != nil {
		b.Skip("no /bin/true")
	}
	tool := filepath.Join(root.ToolDir(), "true")
	os.WriteFile(tool, bin, 0o755)
	env := &Env{Getenv: func(k string) string {
		return map[string]string{"CTX_AGENT": "bench", "CTX_SESSION": "default", "CTX_RUN_ID": "r1"}[k]
	}, authorize: allowAll}
	var direct, viaTsh time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := exec.Command(tool).Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if code := Run(env, []string{"--root", dir, "true"}); code != 0 {
			b.Fatalf("tsh true: %d", code)
		}
		viaTsh += time.Since(t1)
		direct += t1.Sub(t0)
	}
	b.ReportMetric(float64(direct.Nanoseconds())/float64(b.N), "direct-ns/op")
	b.ReportMetric(float64(viaTsh.Nanoseconds())/float64(b.N), "tsh-ns/op")
	b.ReportMetric(float64(viaTsh)/float64(direct), "ratio")
}

// BenchmarkOneShotProcess compares a tsh process running the tool with a
// direct exec of the tool. The tsh process is this test binary in helper
// mode (it carries the testing package, so it starts slower than the
// stripped ctx binary): the ratio is an upper bound.
func BenchmarkOneShotProcess(b *testing.B) {
	dir := b.TempDir()
	root := fsops.Root{Dir: dir}
	os.MkdirAll(root.ToolDir(), 0o755)
	bin, err := os.ReadFile("/bin/true")
	if err != nil {
		b.Skip("no /bin/true")
	}
	tool := filepath.Join(root.ToolDir(), "true")
	os.WriteFile(tool, bin, 0o755)
	self, _ := os.Executable()
	var direct, viaTsh time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := exec.Command(tool).Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		cmd := exec.Command(self, "--root", dir, "true")
		cmd.Env = []string{"TSH_TEST_HELPER=1", "TSH_TEST_ALLOW=1", "CTX_AGENT=bench", "CTX_SESSION=default", "CTX_RUN_ID=r1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("tsh true: %v %s", err, out)
		}
		viaTsh += time.Since(t1)
		direct += t1.Sub(t0)
	}
	b.ReportMetric(float64(direct.Nanoseconds())/float64(b.N), "direct-ns/op")
	b.ReportMetric(float64(viaTsh.Nanoseconds())/float64(b.N), "tsh-ns/op")
	b.ReportMetric(float64(viaTsh)/float64(direct), "ratio")
}

// tsh -x prints each line a script gives it, as the prompt and the line,
// before the line's output; a bad line too.
func TestREPLEcho(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "t", "true")
	f.tsh(t, nil, "which t\n\nwhich \"x\nexit 3\n", "-x").check(t, 3,
		"tsh> which t\n"+f.sys+"/t\ntsh> \ntsh> which \"x\ntsh> exit 3\n", "tsh: unterminated double quote\n")
	f.tsh(t, nil, "which t\n").check(t, 0, f.sys+"/t\n", "")
}
