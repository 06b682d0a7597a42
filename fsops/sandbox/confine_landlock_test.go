package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const confineChildEnv = "CTX_TEST_CONFINE_CHILD"

// TestConfineLandlock runs ctx-confine (RunConfine) with a rules file, as
// an iso shared run with protected paths does: the paths in the file are
// writable, every other path is not (reading stays), the file is gone and
// the variable is not in the program's environment.
func TestConfineLandlock(t *testing.T) {
	requireLandlock(t)
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	landlockWriteFile(t, filepath.Join(dir, "ws/.git/config"), "[core]\n", 0o644)
	landlockWriteFile(t, filepath.Join(dir, "ws/src/main.c"), "int main;\n", 0o644)
	landlockWriteFile(t, filepath.Join(dir, "ws/readme"), "readme\n", 0o644)
	rules := filepath.Join(dir, "rules")
	if err := WriteConfineRules(rules, []string{filepath.Join(dir, "ws/src"), filepath.Join(dir, "ws/readme")}); err != nil {
		t.Fatal(err)
	}
	script := `cd "$1"
echo x >> ws/.git/config && echo config=written
echo x > ws/new && echo new=written
grep -q core ws/.git/config && echo config=read
echo x >> ws/readme && echo readme=written
mkdir ws/src/lib && echo x > ws/src/lib/f && echo src=written
env | grep -c CTX_CONFINE_LANDLOCK
true`
	cmd := exec.Command(os.Args[0], "-test.run=^TestConfineLandlockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), confineChildEnv+"=1", ConfineLandlockEnv+"="+rules,
		"CTX_TEST_CONFINE_ARGS="+strings.Join([]string{ConfineNetwork, "/bin/sh", "sh", "-c", script, "sh", dir}, "\x1f"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"config=read", "readme=written", "src=written", "\n0\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"config=written", "new=written"} {
		if strings.Contains(got, not) {
			t.Errorf("output has %q:\n%s", not, got)
		}
	}
	landlockExpectFile(t, filepath.Join(dir, "ws/.git/config"), "[core]\n")
	landlockExpectAbsent(t, filepath.Join(dir, "ws/new"))
	landlockExpectAbsent(t, rules)

	if err := WriteConfineRules(rules, []string{"relative/path"}); err == nil {
		t.Error("a relative rule path is written")
	}
}

// TestConfineLandlockChild is the re-executed side: RunConfine replaces
// the test binary with the program.
func TestConfineLandlockChild(t *testing.T) {
	if os.Getenv(confineChildEnv) == "" {
		t.Skip("child of TestConfineLandlock")
	}
	os.Unsetenv(confineChildEnv)
	args := strings.Split(os.Getenv("CTX_TEST_CONFINE_ARGS"), "\x1f")
	os.Unsetenv("CTX_TEST_CONFINE_ARGS")
	os.Exit(RunConfine(args, os.Stderr))
}
