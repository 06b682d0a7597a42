package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// binDir holds the ctx binary built once for the script tests, and one
// link per applet made by `ctx --install`, so scripts exercise the real
// static binary exactly as users run it.
var binDir string

// workRoot holds the scripts' work directories; it is world-searchable so
// that scripts can run commands as an unprivileged uid (asuser).
var workRoot string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ctx-scripttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = filepath.Join(dir, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Make the test tree world-traversable so scripts that drop to an
	// unprivileged uid can still run the binary.
	os.Chmod(dir, 0o755)
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(binDir, "ctx"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ctx:", err)
		return 1
	}
	// The hostile agent's toolkit for the containment tests (testdata/attack),
	// static so that it runs inside any sandbox.
	attack := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(binDir, "ctx-attack"), "./testdata/attack")
	attack.Env = append(os.Environ(), "CGO_ENABLED=0")
	attack.Stdout, attack.Stderr = os.Stderr, os.Stderr
	if err := attack.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building testdata/attack:", err)
		return 1
	}
	// The stand-ins of the recipe tests (testdata/standin): agent CLIs,
	// package managers and the hosts they reach, none of them real.
	standin := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(binDir, "ctx-standin"), "./testdata/standin")
	standin.Env = append(os.Environ(), "CGO_ENABLED=0")
	standin.Stdout, standin.Stderr = os.Stderr, os.Stderr
	if err := standin.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building testdata/standin:", err)
		return 1
	}
	workRoot = filepath.Join(dir, "work")
	if err := os.Mkdir(workRoot, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	install := exec.Command(filepath.Join(binDir, "ctx"), "--install", binDir)
	install.Stdout, install.Stderr = os.Stderr, os.Stderr
	if err := install.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "ctx --install:", err)
		return 1
	}
	return m.Run()
}

func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams("testdata/script"))
}

func scriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		WorkdirRoot:         workRoot,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+"/usr/bin:/bin:/usr/sbin:/sbin")
			env.Setenv("CTXBIN", binDir)
			env.Setenv("CTX_ROOT", "")
			env.Setenv("NPMMCP", os.Getenv("CTX_MCP_NPM_DIR"))
			// the go command that runs these tests, for the go recipe
			if goBin, err := exec.LookPath("go"); err == nil {
				env.Setenv("GODIR", filepath.Dir(goBin))
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitcode,
			"asuser":   cmdAsUser,
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			case "sandbox":
				// Sandbox scripts start with [!sandbox] skip. Where they
				// are required (CI runs as root with CTX_REQUIRE_SANDBOX)
				// a kernel that refuses namespaces fails them instead.
				err := sandboxAvailable()
				if err != nil && os.Getenv("CTX_REQUIRE_SANDBOX") != "" {
					return false, fmt.Errorf("sandbox tests are required here but namespaces are refused: %v", err)
				}
				return err == nil, nil
			case "git":
				// Scripts on a real git checkout start with [!git] skip;
				// where sandbox tests are required, git is too (.ci/run
				// installs it), and a missing one fails them instead.
				_, err := exec.LookPath("git")
				if err != nil && os.Getenv("CTX_REQUIRE_SANDBOX") != "" {
					return false, fmt.Errorf("git is required here (CTX_REQUIRE_SANDBOX) but not found: %v", err)
				}
				return err == nil, nil
			case "npmmcp":
				// A real npm MCP server (.ci/run installs it where npm
				// is available and names it in CTX_MCP_NPM_DIR).
				dir := os.Getenv("CTX_MCP_NPM_DIR")
				if dir == "" {
					return false, nil
				}
				if _, err := os.Stat(dir + "/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"); err != nil {
					return false, fmt.Errorf("CTX_MCP_NPM_DIR=%s holds no server-filesystem: %v", dir, err)
				}
				return true, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	}
}

// sandboxAvailable reports whether this kernel lets the current user build
// the namespaces ctx agent start needs.
func sandboxAvailable() error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
	return cmd.Run()
}

// cmdAsUser runs `asuser UID [!|exitcode N] PROG ARGS...`-style: it runs
// PROG as uid and gid UID (root only) with the script's environment and
// directory, and fails unless it exits 0, or exactly N with exitcode N.
func cmdAsUser(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: asuser UID [exitcode N] PROG [ARGS...]")
	}
	uid, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("asuser: bad uid %q", args[0])
	}
	want := 0
	args = args[1:]
	if args[0] == "exitcode" && len(args) > 2 {
		if want, err = strconv.Atoi(args[1]); err != nil {
			ts.Fatalf("asuser: bad code %q", args[1])
		}
		args = args[2:]
	}
	path := args[0]
	if !strings.Contains(path, "/") {
		for _, d := range filepath.SplitList(ts.Getenv("PATH")) {
			if st, err := os.Stat(filepath.Join(d, path)); err == nil && !st.IsDir() {
				path = filepath.Join(d, path)
				break
			}
		}
	}
	cmd := exec.Command(path, args[1:]...)
	cmd.Dir = ts.MkAbs(".")
	for _, k := range []string{"PATH", "HOME", "CTXBIN", "WORK", "TMPDIR"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	fmt.Fprintf(ts.Stdout(), "%s", out.String())
	fmt.Fprintf(ts.Stderr(), "%s", errb.String())
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("asuser: %v", err)
	}
	if got != want {
		ts.Fatalf("asuser %d %s: exit code %d, want %d\n%s", uid, args[0], got, want, errb.String())
	}
}

// cmdExitcode runs `exitcode N PROG ARGS...` and fails unless PROG exits with
// exactly N. testscript's `! exec` only asserts "non-zero"; the exit codes
// are ABI, so scripts pin them.
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: bad code %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("exit code %d, want %d", got, want)
	}
}
