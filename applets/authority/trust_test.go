package authority

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ctx/fsops"
)

// trustTree builds a tree owned by the test's uid: a system tier with
// fs.read, a shared space proj that agent coder may write holding a
// planted fs.read, a shared space lib nobody writes, and agent architect
// whose path lists proj's tier first.
func trustTree(t *testing.T) fsops.Root {
	t.Helper()
	root := fsops.Root{Dir: t.TempDir()}
	os.Chmod(root.Dir, 0o755)
	uid := strconv.Itoa(os.Getuid())
	gid := strconv.Itoa(os.Getgid())
	write := func(rel, content string, mode os.FileMode) {
		p := root.Path(rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	tool := func(tier, name, policyLine string) {
		write(tier+"/"+name, "#!/bin/sh\n", 0o755)
		write(tier+"/"+name+".d/policy", policyLine+"\n", 0o644)
	}
	agent := func(name, perm, pol, path string) {
		for c, v := range map[string]string{"label": name + "_t\n", "perm": perm + "\n", "uid": uid + "\n",
			"gid": gid + "\n", "policy": pol, "path": path} {
			write("agent/"+name+".d/"+c, v, 0o644)
		}
	}
	tool("tool", "fs.read", "allow architect_t tool:fs.read execute")
	tool("shared/proj/tool", "fs.read", "allow architect_t tool:fs.read execute")
	tool("shared/lib/tool", "lint", "allow architect_t tool:lint execute")
	tool("shared/lib/tool", "fs.stat", "allow architect_t tool:fs.stat execute")
	tool("tool", "fs.stat", "allow architect_t tool:fs.stat execute")
	agent("coder", "rwx", "allow coder_t shared:proj read\nallow coder_t shared:proj write\n", "/ctx/tool\n")
	agent("architect", "r--", "allow architect_t tool:fs.read execute\nallow architect_t tool:lint execute\nallow architect_t tool:fs.stat execute\n",
		"/ctx/shared/proj/tool\n/ctx/shared/lib/tool\n/ctx/tool\n")
	return root
}

func TestTrustedToolDirs(t *testing.T) {
	root := trustTree(t)
	a, err := LoadAgent(root, "architect")
	if err != nil {
		t.Fatal(err)
	}
	tp := TrustedToolDirs(root, a)
	if len(tp.Skipped) != 1 || tp.Skipped[0].Tier != "/ctx/shared/proj/tool" || tp.Skipped[0].Reason != "shared/proj is writable by agent coder" {
		t.Fatalf("skipped = %+v", tp.Skipped)
	}
	want := []string{root.Path("shared/lib/tool"), root.Path("tool")}
	if strings.Join(tp.Dirs, ":") != strings.Join(want, ":") || strings.Join(tp.Tiers, ":") != "/ctx/shared/lib/tool:/ctx/tool" {
		t.Fatalf("dirs = %q tiers = %q", tp.Dirs, tp.Tiers)
	}

	// The planted fs.read is not found: the system one is, for every
	// consumer of the lookup.
	hit, err := tp.Lookup("fs.read")
	if err != nil || hit.Path != root.Path("tool/fs.read") {
		t.Fatalf("Lookup(fs.read) = %+v, %v", hit, err)
	}
	facts, _ := ToolFacts(root, a, "fs.read")
	if facts.File == nil || facts.File.Path != root.Path("tool/fs.read") {
		t.Fatalf("ToolFacts(fs.read) = %+v", facts.File)
	}
	tiers, tools := tp.SkippedFor("fs.read")
	if len(tiers) != 1 || len(tools) != 0 {
		t.Fatalf("SkippedFor(fs.read) = %+v %+v", tiers, tools)
	}

	// A tool of a trusted tier that fails on its own (world-writable
	// policy) is passed over; the next tier's tool of that name is used.
	os.Chmod(root.Path("shared/lib/tool/fs.stat.d/policy"), 0o666)
	tp = TrustedToolDirs(root, a)
	hits, skipped := tp.List()
	var names []string
	for _, h := range hits {
		names = append(names, h.Name+"@"+tp.TierOf(h.Dir))
	}
	if got := strings.Join(names, " "); got != "lint@/ctx/shared/lib/tool fs.read@/ctx/tool fs.stat@/ctx/tool" {
		t.Fatalf("List = %s", got)
	}
	if len(skipped) != 1 || skipped[0].Tool != "/ctx/shared/lib/tool/fs.stat" ||
		skipped[0].Reason != "shared/lib/tool/fs.stat.d/policy is world-writable (mode 0666)" {
		t.Fatalf("skipped tools = %+v", skipped)
	}

	// Taking write away from coder makes proj's tier trusted again (its
	// directories are the tree owner's and not writable by others).
	os.WriteFile(root.Path("agent/coder.d/policy"), []byte("allow coder_t shared:proj read\n"), 0o644)
	if tp := TrustedToolDirs(root, a); len(tp.Skipped) != 0 {
		t.Fatalf("skipped without a writer: %+v", tp.Skipped)
	}
}

// TestTrustRefusesWhatItCannotExamine: an unreadable agent directory means
// the writers are unknown, and nothing is trusted.
func TestTrustUnknownTree(t *testing.T) {
	tr := LoadTrust(fsops.Root{Dir: filepath.Join(t.TempDir(), "absent")})
	if ok, reason := tr.Tier("/x/tool"); ok || !strings.HasPrefix(reason, "cannot examine the tree: ") {
		t.Fatalf("Tier on a missing tree = %v, %q", ok, reason)
	}
}

// TestTrustOwnership needs root: tiers and tools owned by an agent's uid,
// or by a stranger, are untrusted, and a sticky world-writable directory
// is fine when what is below it is root's.
func TestTrustOwnership(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to chown")
	}
	root := trustTree(t)
	os.WriteFile(root.Path("agent/coder.d/uid"), []byte("60101\n"), 0o644)
	os.WriteFile(root.Path("agent/coder.d/policy"), nil, 0o644)
	a, err := LoadAgent(root, "architect")
	if err != nil {
		t.Fatal(err)
	}
	os.Chown(root.Path("shared/proj/tool"), 60101, 60101)
	os.MkdirAll(root.Path("shared/lib"), 0o755)
	// shared/ sticky and world-writable: lib's tier (root's below it) is
	// fine, proj's is not for its own owner.
	os.Chmod(root.Path("shared"), 0o777|os.ModeSticky)
	tp := TrustedToolDirs(root, a)
	if len(tp.Skipped) != 1 || tp.Skipped[0].Reason != "shared/proj/tool is owned by uid 60101 of agent coder" {
		t.Fatalf("skipped = %+v", tp.Skipped)
	}
	// a sticky directory whose next component is an agent's
	os.Chown(root.Path("shared/proj"), 60101, 60101)
	tp = TrustedToolDirs(root, a)
	if len(tp.Skipped) != 1 || tp.Skipped[0].Reason != "shared is world-writable and sticky, but shared/proj is owned by uid 60101" {
		t.Fatalf("skipped = %+v", tp.Skipped)
	}
	// without the sticky bit
	os.Chmod(root.Path("shared"), 0o777)
	tp = TrustedToolDirs(root, a)
	if len(tp.Skipped) != 2 || tp.Skipped[1].Reason != "shared is world-writable (mode 0777)" {
		t.Fatalf("skipped = %+v", tp.Skipped)
	}
	os.Chmod(root.Path("shared"), 0o755)
	tp = TrustedToolDirs(root, a)
	os.Chown(root.Path("shared/lib/tool/lint"), 4242, 4242)
	_, skipped := tp.List()
	if len(skipped) != 1 || !strings.HasPrefix(skipped[0].Reason, "shared/lib/tool/lint is owned by uid 4242, neither root nor the tree owner") {
		t.Fatalf("skipped tools = %+v", skipped)
	}
	if _, err := tp.Lookup("lint"); err == nil {
		t.Fatal("a stranger's tool was found")
	}
}
