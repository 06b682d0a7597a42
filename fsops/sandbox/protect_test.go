package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ctx/policy/sandboxplan"
)

// withProtect inserts OpProtectPath operations right after the workspace
// bind, as BuildPlan does.
func withProtect(plan *sandboxplan.Plan, rels ...string) *sandboxplan.Plan {
	i := slices.IndexFunc(plan.Ops, func(op sandboxplan.Op) bool { return op.Why == "workspace" })
	var ops []sandboxplan.Op
	for _, rel := range rels {
		ops = append(ops, sandboxplan.Op{Kind: sandboxplan.OpProtectPath, Target: "/workspace/" + rel, Why: "protect " + rel})
	}
	plan.Ops = slices.Insert(plan.Ops, i+1, ops...)
	return plan
}

const protectScript = `
cat .git/config
echo hook > .git/hooks/pre-commit 2>/dev/null && echo hook=written || echo hook=refused
echo x >> .git/config 2>/dev/null && echo config=written || echo config=refused
mv .git .git-moved 2>/dev/null && echo git=moved || echo git=stays
rm -rf .git 2>/dev/null; test -e .git/config && echo git=present
echo x > .envrc 2>/dev/null && echo envrc=written || echo envrc=refused
echo edit >> src.txt && echo work=written
mkdir newdir && echo new > newdir/f && echo create=ok
while read -r a b c d mp opts rest; do case $mp in /workspace/.git|/workspace/.envrc) echo "$mp ${opts%%,*}";; esac; done < /proc/self/mountinfo
`

// TestSandboxProtectPath: the protected paths of the workspace are
// read-only in place (EROFS, and a mount point cannot be moved or
// removed); the rest of the workspace stays writable; the host's files are
// unchanged afterwards.
func TestSandboxProtectPath(t *testing.T) {
	requireSandbox(t)
	isos := []string{"userns"}
	if os.Geteuid() == 0 {
		isos = append(isos, "uid")
	}
	for _, iso := range isos {
		t.Run(iso, func(t *testing.T) {
			ws := t.TempDir()
			os.Chmod(ws, 0o777)
			for name, data := range map[string]string{".git/config": "[core]\n", ".git/hooks/README": "hooks\n", ".envrc": "echo hi\n", "src.txt": "code\n"} {
				os.MkdirAll(filepath.Join(ws, filepath.Dir(name)), 0o777)
				os.WriteFile(filepath.Join(ws, name), []byte(data), 0o666)
				os.Chmod(filepath.Join(ws, name), 0o666) // past the umask: a refusal must come from the mount
			}
			os.Chmod(filepath.Join(ws, ".git"), 0o777)
			os.Chmod(filepath.Join(ws, ".git/hooks"), 0o777)
			uid := uint32(os.Getuid())
			if iso == "uid" {
				uid = 65534
			}
			out, code := runPlan(t, withProtect(testPlan(t, iso, uid, ws, protectScript), ".git", ".envrc"))
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for _, want := range []string{"[core]", "hook=refused", "config=refused", "git=stays", "git=present", "envrc=refused",
				"work=written", "create=ok", "/workspace/.git ro", "/workspace/.envrc ro"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(ws, ".git/config")); string(b) != "[core]\n" {
				t.Errorf(".git/config now %q", b)
			}
			if _, err := os.Lstat(filepath.Join(ws, ".git/hooks/pre-commit")); err == nil {
				t.Error("a hook was planted")
			}
			if b, _ := os.ReadFile(filepath.Join(ws, ".envrc")); string(b) != "echo hi\n" {
				t.Errorf(".envrc now %q", b)
			}
		})
	}
}

// TestSandboxProtectPathRefusesSymlink: a protected path that became a
// symlink after the host looked (a race with another writer) stops the
// build; the symlink's target is neither protected nor shown.
func TestSandboxProtectPathRefusesSymlink(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	target := t.TempDir()
	if err := os.Symlink(target, filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	out, code := runPlan(t, withProtect(testPlan(t, "userns", uint32(os.Getuid()), ws, "echo launched"), ".git"))
	if code != 69 || !strings.Contains(out, "protect .git") || !strings.Contains(out, "a symlink now stands on the way") || strings.Contains(out, "launched") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	// a path gone since the host looked
	out, code = runPlan(t, withProtect(testPlan(t, "userns", uint32(os.Getuid()), t.TempDir(), "echo launched"), ".envrc"))
	if code != 69 || !strings.Contains(out, "gone since the run started") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
