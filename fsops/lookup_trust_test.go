package fsops

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLookupToolFuncPassesOver: a refused hit is not found, exactly as if
// absent; the search (and the listing) goes on with the next directory.
func TestLookupToolFuncPassesOver(t *testing.T) {
	root := t.TempDir()
	bad, good := filepath.Join(root, "bad"), filepath.Join(root, "good")
	mkTool(t, bad, "fs.read", 0o755)
	mkTool(t, bad, "only", 0o755)
	mkTool(t, good, "fs.read", 0o755)
	dirs := []string{bad, good}
	refuseBad := func(h ToolHit) bool { return h.Dir != bad }

	hit, err := LookupToolFunc(dirs, "fs.read", refuseBad)
	if err != nil || hit.Dir != good {
		t.Fatalf("LookupToolFunc = %+v, %v", hit, err)
	}
	if _, err := LookupToolFunc(dirs, "only", refuseBad); err == nil {
		t.Fatal("a refused hit was found")
	}
	if hit, _ := LookupToolFunc(dirs, "fs.read", nil); hit.Dir != bad {
		t.Fatal("nil accept must accept all")
	}
	hits, _ := ListToolsFunc(dirs, refuseBad)
	if len(hits) != 1 || hits[0].Name != "fs.read" || hits[0].Dir != good {
		t.Fatalf("ListToolsFunc = %+v", hits)
	}
}

func TestOwnerChain(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "shared/p/tool"), 0o755)
	facts, missing, err := OwnerChain(root, filepath.Join(root, "shared/p/tool"))
	if err != nil || missing || len(facts) != 4 {
		t.Fatalf("OwnerChain = %+v, %v, %v", facts, missing, err)
	}
	for i, rel := range []string{"", "shared", "shared/p", "shared/p/tool"} {
		if want := filepath.Join(root, rel); facts[i].Path != want || !facts[i].Mode.IsDir() || facts[i].UID != uint32(os.Getuid()) {
			t.Errorf("component %d = %+v, want %s", i, facts[i], want)
		}
	}
	// stops at what does not exist yet
	facts, missing, err = OwnerChain(root, filepath.Join(root, "shared/q/tool"))
	if err != nil || !missing || len(facts) != 2 {
		t.Fatalf("OwnerChain(missing) = %+v, %v, %v", facts, missing, err)
	}
	// never walks through a symlink
	os.Symlink(filepath.Join(root, "shared"), filepath.Join(root, "link"))
	facts, _, err = OwnerChain(root, filepath.Join(root, "link/p/tool"))
	if err != nil || len(facts) != 2 || facts[1].Mode&fs.ModeSymlink == 0 {
		t.Fatalf("OwnerChain(symlink) = %+v, %v", facts, err)
	}
	if _, _, err := OwnerChain(filepath.Join(root, "shared"), root); err == nil {
		t.Fatal("a target outside the top was walked")
	}
}

func TestControlTreeFacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x.d")
	os.MkdirAll(filepath.Join(dir, "hooks/pre.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "policy"), nil, 0o644)
	os.Symlink("/bin/true", filepath.Join(dir, "hooks/pre.d/00-x"))
	facts, more, err := ControlTreeFacts(dir)
	if err != nil || more {
		t.Fatal(err, more)
	}
	var got []string
	for _, f := range facts {
		got = append(got, strings.TrimPrefix(f.Path, dir))
	}
	if strings.Join(got, " ") != " /hooks /hooks/pre.d /hooks/pre.d/00-x /policy" {
		t.Fatalf("walk = %q", got)
	}
	if facts, _, err := ControlTreeFacts(filepath.Join(dir, "absent")); err != nil || facts != nil {
		t.Fatal("a missing control directory is no error and no facts")
	}
	for i := 0; i < MaxControlEntries; i++ {
		os.WriteFile(filepath.Join(dir, "f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))), nil, 0o644)
	}
	if _, more, _ := ControlTreeFacts(dir); !more {
		t.Fatal("an oversized control directory was walked whole")
	}
}
