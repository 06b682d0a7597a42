package ctx

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"ctx/applets/cli"
)

// snapshot describes every path of a tree: type, mode, inode, mtime and a
// digest of the contents, so two snapshots differ if anything was touched.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		info, _ := d.Info()
		st := info.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %v ino=%d mtime=%d", strings.TrimPrefix(p, root), info.Mode(), st.Ino, st.Mtim.Nano())
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" sha=%x", sha256.Sum256(b))
		}
		lines = append(lines, line)
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func runIn(t *testing.T, f func(*cli.Env, []string) int, args ...string) (int, string, string) {
	t.Helper()
	e, out, errb := cli.BufferEnv("", nil)
	e.Name = "ctx test"
	code := f(e, args)
	return code, out.String(), errb.String()
}

func TestBootstrapIdempotent(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	if code, out, errs := runIn(t, RunBootstrap, "--root", root); code != 0 {
		t.Fatalf("first bootstrap: %d\n%s%s", code, out, errs)
	}
	before := snapshot(t, root)
	code, out, errs := runIn(t, RunBootstrap, "--root", root)
	if code != 0 || !strings.Contains(out, "is up to date") || strings.Contains(out, "created") {
		t.Fatalf("second bootstrap: %d\n%s%s", code, out, errs)
	}
	if after := snapshot(t, root); after != before {
		t.Fatalf("second bootstrap changed the tree")
	}
	if code, out, _ := runIn(t, RunDoctor, "--root", root, "-q"); code != 0 {
		t.Fatalf("doctor after bootstrap: %d\n%s", code, out)
	}
}

func TestBootstrapRepairsAndKeeps(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	runIn(t, RunBootstrap, "--root", root)
	policy := filepath.Join(root, "agent", "coder.d", "policy")
	os.WriteFile(policy, []byte("allow coder_t tool:fs.read execute\n"), 0o600) // an administrator's edit
	os.Chmod(policy, 0o600)                                                     // and a wrong mode
	os.Remove(filepath.Join(root, "tool", "fs.read.d", "schema"))
	os.WriteFile(filepath.Join(root, "shared", "cortexfs-docs", "man", "ctx.tool.md"), []byte("old"), 0o644)

	code, out, _ := runIn(t, RunDoctor, "--root", root, "-q")
	for _, want := range []string{"invalid agent/coder.d/policy: mode 0600, want 0644", "missing tool/fs.read.d/schema", "stale shared/cortexfs-docs/man/ctx.tool.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("doctor exit %d, want 1", code)
	}
	code, out, _ = runIn(t, RunBootstrap, "--root", root, "-v")
	if code != 0 {
		t.Fatalf("bootstrap: %d %s", code, out)
	}
	if b, _ := os.ReadFile(policy); string(b) != "allow coder_t tool:fs.read execute\n" {
		t.Errorf("bootstrap rewrote the administrator's policy: %q", b)
	}
	if st, _ := os.Stat(policy); st.Mode().Perm() != 0o644 {
		t.Errorf("mode not repaired: %v", st.Mode())
	}
	for _, want := range []string{"created tool/fs.read.d/schema", "updated shared/cortexfs-docs/man/ctx.tool.md", "repaired agent/coder.d/policy"} {
		if !strings.Contains(out, want) {
			t.Errorf("bootstrap output lacks %q:\n%s", want, out)
		}
	}
}

func TestBootstrapRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "ctx")
	outside := filepath.Join(dir, "outside")
	os.MkdirAll(filepath.Join(root, "tool"), 0o755)
	os.Mkdir(outside, 0o755)
	os.Symlink(outside, filepath.Join(root, "tool", "fs.read.d"))
	code, _, errs := runIn(t, RunBootstrap, "--root", root)
	if code != 1 || !strings.Contains(errs, "symlink") {
		t.Fatalf("bootstrap over a symlinked control dir: %d %s", code, errs)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("bootstrap wrote through the symlink: %v", entries)
	}
}

func TestBootstrapKeepsForeignToolAndRelinksStale(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	os.MkdirAll(filepath.Join(root, "tool"), 0o755)
	mine := filepath.Join(root, "tool", "fs.stat")
	os.WriteFile(mine, []byte("#!/bin/sh\necho mine\n"), 0o755)
	code, out, _ := runIn(t, RunBootstrap, "--root", root)
	if code != 1 || !strings.Contains(out, "kept tool/fs.stat") {
		t.Fatalf("bootstrap over a foreign tool: %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(mine); string(b) != "#!/bin/sh\necho mine\n" {
		t.Fatalf("foreign tool changed")
	}
	// Simulate an upgrade: bin/ctx replaced by a new inode; the tool links
	// bootstrap made earlier must follow it, atomically.
	bin := filepath.Join(root, "bin", "ctx")
	b, _ := os.ReadFile(bin)
	os.Remove(bin)
	os.WriteFile(bin, b, 0o755)
	code, out, _ = runIn(t, RunBootstrap, "--root", root, "-v")
	if !strings.Contains(out, "relinked tool/fs.read") {
		t.Fatalf("no relink after upgrade: %d\n%s", code, out)
	}
	a, _ := os.Stat(bin)
	r, _ := os.Stat(filepath.Join(root, "tool", "fs.read"))
	if !os.SameFile(a, r) {
		t.Fatal("tool/fs.read is not a hard link of bin/ctx")
	}
}
