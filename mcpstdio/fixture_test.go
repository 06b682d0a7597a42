package mcpstdio

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The fixture servers live in their own module (testdata/mcpserver), built
// once per test run with the go command; it needs the module proxy (or a
// warm module cache) for the official Go SDK.
var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureErr  error
)

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	// go test puts GOROOT/bin first on the test's PATH, so this is only
	// reached when the test binary runs on its own: let the exec fail there.
	return "go"
}

func fixture(t testing.TB) string {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ctx-mcpfixture-")
		if err != nil {
			fixtureErr = err
			return
		}
		cmd := exec.Command(goTool(), "build", "-buildvcs=false", "-o", dir+"/", "./server", "./client")
		cmd.Dir = "../testdata/mcpserver"
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fixtureErr = fmt.Errorf("building the MCP fixture: %v\n%s", err, out)
			return
		}
		fixtureDir = dir
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtureDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

// fixtureServer returns a server config running the fixture in mode, whose
// pids are recorded in the returned file.
func fixtureServer(t testing.TB, mode ...string) (ServerConfig, string) {
	pids := filepath.Join(t.TempDir(), "pids")
	return ServerConfig{
		Command: filepath.Join(fixture(t), "server"),
		Args:    mode,
		Env:     map[string]string{"FIXTURE_PIDS": pids},
	}, pids
}

// recordedPids reads the pids the fixture wrote.
func recordedPids(t *testing.T, file string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("fixture pids: %v", err)
	}
	out := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		role, pid, _ := strings.Cut(l, " ")
		out[role], _ = strconv.Atoi(pid)
	}
	return out
}

// assertGone fails unless every recorded process is gone from /proc:
// killed and reaped, not even a zombie.
func assertGone(t *testing.T, pidFile string, wantRoles ...string) {
	t.Helper()
	pids := recordedPids(t, pidFile)
	for _, role := range wantRoles {
		pid, ok := pids[role]
		if !ok {
			t.Errorf("fixture recorded no %s pid (got %v)", role, pids)
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Errorf("%s pid %d still exists: %s", role, pid, stat)
		}
	}
}
