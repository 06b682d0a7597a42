package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// newAgentTree requires the sandbox (failing where CTX_REQUIRE_SANDBOX says
// it must run, else skipping) and bootstraps a root under a new directory
// of the scripts' world-searchable work root, with a workspace beside it
// (ctx agent start refuses one that holds its tree). It returns both.
func newAgentTree(t *testing.T, prefix string) (root, ws string) {
	t.Helper()
	if err := sandboxAvailable(); err != nil {
		if os.Getenv("CTX_REQUIRE_SANDBOX") != "" {
			t.Fatalf("sandbox tests are required here: %v", err)
		}
		t.Skip(err)
	}
	dir, err := os.MkdirTemp(workRoot, prefix)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	root, ws = filepath.Join(dir, "r"), filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ws, 0o777)
	if out, err := exec.Command(filepath.Join(binDir, "ctx"), "bootstrap", "--root", root).CombinedOutput(); err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, out)
	}
	return root, ws
}
