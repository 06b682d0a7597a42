package tsh

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"ctx/fsops"
)

// The test binary doubles as two helper programs:
//
//   - named tsh-probe (a copy installed as a tool), it is a tool that
//     reports its argv, environment and open descriptors as JSON;
//   - with TSH_TEST_HELPER=1 it is tsh itself, run as a real process on a
//     real terminal by the PTY tests; TSH_TEST_ALLOW=1 installs the allowing
//     authorizer so that the exec mechanics can be exercised before the
//     real authority check is wired in.
func TestMain(m *testing.M) {
	switch {
	case filepath.Base(os.Args[0]) == "tsh-probe":
		os.Exit(probeMain())
	case os.Getenv("TSH_TEST_HELPER") == "1":
		e := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
		if os.Getenv("TSH_TEST_ALLOW") == "1" {
			e.authorize = allowAll
		}
		os.Exit(Run(e, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// allowAll is the test-only authorizer.
func allowAll(*Env, fsops.Root, fsops.ToolHit) (string, string, bool) { return "", "", true }

// probeReport is what tsh-probe prints.
type probeReport struct {
	Argv []string          `json:"argv"`
	Env  []string          `json:"env"`
	FDs  map[string]string `json:"fds"` // fd number -> readlink target
	Exe  string            `json:"exe"`
}

func probeMain() int {
	var r probeReport
	r.Argv = os.Args
	r.Env = os.Environ()
	sort.Strings(r.Env)
	r.FDs = map[string]string{}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		r.FDs[e.Name()] = target
	}
	r.Exe, _ = os.Readlink("/proc/self/exe")
	json.NewEncoder(os.Stdout).Encode(r)
	for _, a := range os.Args[1:] {
		if code, ok := strings.CutPrefix(a, "exit="); ok {
			n, _ := strconv.Atoi(code)
			return n
		}
	}
	return 0
}

// fixture is a /ctx tree in a temporary directory.
type fixture struct {
	root      fsops.Root
	sys, user string // ROOT/tool and ROOT/home/UID/tool
	home      string // ROOT/home/UID
	// authorize, when set, is the check tsh runs instead of the real
	// one (allowAll exercises the exec mechanics).
	authorize func(*Env, fsops.Root, fsops.ToolHit) (string, string, bool)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{root: fsops.Root{Dir: dir}}
	f.sys = f.root.ToolDir()
	f.home = f.root.Home(os.Geteuid())
	f.user = filepath.Join(f.home, "tool")
	for _, d := range []string{f.sys, f.user} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// script installs an executable shell script tool dir/name.
func (f *fixture) script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// control writes dir/name.d/file.
func (f *fixture) control(t *testing.T, dir, name, file, content string) {
	t.Helper()
	d := filepath.Join(dir, name+".d")
	os.MkdirAll(d, 0o755)
	if err := os.WriteFile(filepath.Join(d, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// probe installs a copy of the test binary as the tool dir/tsh-probe.
func (f *fixture) probe(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(dir, "tsh-probe")
	dst, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// result is one in-process tsh run.
type result struct {
	code           int
	stdout, stderr string
}

// tsh runs tsh in-process with --root set to the fixture, the given
// environment (nothing else is visible) and stdin.
func (f *fixture) tsh(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb strings.Builder
	e := &Env{
		Stdin:  strings.NewReader(stdin),
		Stdout: &out,
		Stderr: &errb,
		Getenv: func(k string) string { return env[k] },

		authorize: f.authorize,
	}
	code := Run(e, append([]string{"--root", f.root.Dir}, args...))
	return result{code, out.String(), errb.String()}
}

func (r result) check(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if r.code != code || r.stdout != stdout || r.stderr != stderr {
		t.Errorf("got exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr, code, stdout, stderr)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
