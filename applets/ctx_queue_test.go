package applets

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ctx/applets/toolrun"
)

// TestQueueJobEnvironmentFromEnv: the command of ctx queue exec gets the
// applet's environment (Env), not the process's, plus the job's
// coordinates. The applets run in-process with an Env whose CTX_TEST_MARK
// differs from the process's, in a child test process: queue exec makes
// its process a child subreaper (proc.StartTree), which must not happen
// to the test binary other tests' orphans would be reparented to.
func TestQueueJobEnvironmentFromEnv(t *testing.T) {
	if root := os.Getenv("CTX_TEST_QUEUE_ROOT"); root != "" {
		queueJobEnvironmentChild(t, root)
		return
	}
	root := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestQueueJobEnvironmentFromEnv$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CTX_TEST_QUEUE_ROOT="+root, "CTX_TEST_MARK=from-the-process")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(root, "seen"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "from-env j1.req.json" {
		t.Errorf("the job saw %q, want %q", got, "from-env j1.req.json")
	}
}

func queueJobEnvironmentChild(t *testing.T, root string) {
	vars := []string{"PATH=" + os.Getenv("PATH"), "CTX_TEST_MARK=from-env"}
	run := func(stdin string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		e := toolrun.EnvFromList("ctx", "ctx", vars, strings.NewReader(stdin), &out, &errb)
		return dispatch(e, "ctx", args), errb.String()
	}
	if code, stderr := run("", "shared", "new", "--root", root, "proj"); code != 0 {
		t.Fatalf("shared new: exit %d: %s", code, stderr)
	}
	if code, stderr := run("{}", "queue", "publish", "--root", root, "proj", "--name", "j1.req.json"); code != 0 {
		t.Fatalf("publish: exit %d: %s", code, stderr)
	}
	seen := filepath.Join(root, "seen")
	if code, stderr := run("", "queue", "exec", "--root", root, "proj", "--worker", "w1", "--",
		"sh", "-c", `printf '%s %s' "$CTX_TEST_MARK" "$CTX_QUEUE_JOB" > `+seen); code != 0 {
		t.Fatalf("exec: exit %d: %s", code, stderr)
	}
}
