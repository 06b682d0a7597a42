package authority

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctx/fsops"
	"ctx/policy"
)

func TestReroot(t *testing.T) {
	root := fsops.Root{Dir: "/srv/ctx"}
	for in, want := range map[string]string{
		"/ctx":             "/srv/ctx",
		"/ctx/tool":        "/srv/ctx/tool",
		"/ctx/home/1/tool": "/srv/ctx/home/1/tool",
		"/ctxfoo":          "/ctxfoo",
		"/work":            "/work",
	} {
		if got := Reroot(root, in); got != want {
			t.Errorf("Reroot(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLoadAgentRefusals: a missing agent wraps ErrNoAgent, a symlinked
// control directory and a broken control are errors naming the file.
func TestLoadAgentRefusals(t *testing.T) {
	root := fsops.Root{Dir: t.TempDir()}
	if _, err := LoadAgent(root, "ghost"); !errors.Is(err, ErrNoAgent) {
		t.Fatalf("missing agent: %v", err)
	}
	os.MkdirAll(root.AgentDir(), 0o755)
	other := t.TempDir()
	os.Symlink(other, root.AgentControl("linked"))
	if _, err := LoadAgent(root, "linked"); err == nil {
		t.Fatal("symlinked control directory accepted")
	}
	d := root.AgentControl("bad")
	os.MkdirAll(d, 0o755)
	for name, v := range map[string]string{"label": "bad_t\n", "perm": "rwz\n", "uid": "0\n", "gid": "0\n", "policy": ""} {
		os.WriteFile(filepath.Join(d, name), []byte(v), 0o644)
	}
	_, err := LoadAgent(root, "bad")
	if err == nil || !strings.Contains(err.Error(), "agent/bad.d/perm") {
		t.Fatalf("bad perm: %v", err)
	}
	os.WriteFile(filepath.Join(d, "perm"), []byte("r--\n"), 0o644)
	a, err := LoadAgent(root, "bad")
	if err != nil || a.Subject != "bad_t" || a.Ceiling != policy.CeilingRead {
		t.Fatalf("LoadAgent = %+v, %v", a, err)
	}
}
