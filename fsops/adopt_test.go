package fsops

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// agentDefTree makes root/agent/a and root/agent/a.d with the controls a
// reference agent has.
func agentDefTree(t testing.TB) Root {
	r := Root{Dir: t.TempDir()}
	d := r.AgentControl("a")
	for _, p := range []string{d, filepath.Join(d, "hooks", "pre.d"), filepath.Join(d, "hooks", "post.d")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"owner", "uid", "gid", "groups", "perm", "label", "iso", "parent", "life", "root", "cwd",
		"env", "path", "mount", "protect", "model", "window", "abi", "approval", "tools", "system.md", "policy", "status", "pid", "log", "meta.json"} {
		if err := os.WriteFile(filepath.Join(d, c), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(r.Path("agent", "a"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCheckAgentDefNamesTheControl: one control of root's agent given to
// another uid is named, with the fix, as a ForeignError (EACCES).
func TestCheckAgentDefNamesTheControl(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	r := agentDefTree(t)
	if err := r.CheckAgentDef("a", 0); err != nil {
		t.Fatalf("root's own agent: %v", err)
	}
	p := filepath.Join(r.AgentControl("a"), "policy")
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := r.CheckAgentDef("a", 0)
	var fe *ForeignError
	if !errors.As(err, &fe) || fe.Path != p || !errors.Is(err, syscall.EACCES) ||
		!strings.Contains(err.Error(), "agent/a.d/policy is owned by uid 65534") || !strings.Contains(err.Error(), "rm -rf "+p) {
		t.Fatalf("got %v", err)
	}
	// For uid 65534 itself the control is its own and the rest root's.
	if err := r.CheckAgentDef("a", 65534); err != nil {
		t.Fatalf("for its own uid: %v", err)
	}
}

// BenchmarkCheckAgentDef is what ctx agent start adds before it starts a
// run: the walk of the agent's definition.
func BenchmarkCheckAgentDef(b *testing.B) {
	r := agentDefTree(b)
	for b.Loop() {
		if err := r.CheckAgentDef("a", uint32(os.Geteuid())); err != nil {
			b.Fatal(err)
		}
	}
}
