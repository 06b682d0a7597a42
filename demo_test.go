package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDemo runs scripts/demo.sh (what ./build.sh demo runs) without a
// terminal, as CI and a pasted command do: every command is shown before
// its output, the refusals it shows are refusals, and it ends with ok.
func TestDemo(t *testing.T) {
	if err := sandboxAvailable(); err != nil {
		if os.Getenv("CTX_REQUIRE_SANDBOX") != "" {
			t.Fatalf("the demo starts sandboxes, required here (CTX_REQUIRE_SANDBOX) but refused: %v", err)
		}
		t.Skipf("namespaces refused: %v", err)
	}
	work := t.TempDir()
	os.Chmod(work, 0o755)
	ws := filepath.Join(work, "ws")
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("# a workspace\n"), 0o644)
	script, _ := filepath.Abs("scripts/demo.sh")
	cmd := exec.Command("/bin/sh", script, filepath.Join(binDir, "ctx"))
	cmd.Dir = ws
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work, "CTX_DEMO_ROOT=" + filepath.Join(work, "demo-root")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	text := string(out)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "ok" {
		t.Errorf("the demo's last line is %q, want ok\n%s", last, text)
	}
	for _, want := range []string{
		// each command, then its output
		`(?m)^\$ ctx bootstrap --root \S+/demo-root\nctx bootstrap: `,
		`(?m)^\$ ctx doctor --root \S+/demo-root\nctx doctor: \S+: \d+ checks, all ok\n`,
		`(?m)^tsh> which fs.read\n/ctx/tool/fs.read\n`,
		`(?m)^tsh> fs.stat README.md\n\{"name":"README.md"`,
		`(?m)^tsh> shell.exec pwd; id -u\n/workspace\n\d+\ntsh> exit\n`,
		`(?m)^\$ ctx agent start --root \S+ architect -- tsh fs.write notes.txt hello\n.*refused by perm.*\n\(refused: exit 13, as it should be\)$`,
		`(?m)^\$ tail -n 8 \S+/events.jsonl\n\{"ts":`,
		`"type":"agent.stop","agent":"coder".*"status":"ok"`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("the demo's output does not match %s\n%s", want, text)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "notes.txt")); err == nil {
		t.Error("the architect's refused write left notes.txt")
	}
}
