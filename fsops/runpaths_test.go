package fsops

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// A tree has one key however it is reached (a symlink to it, a relative
// --root), and two trees that exist at once have two.
func TestRuntimeKey(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(a, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	ka, err := Root{Dir: a}.RuntimeKey()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^tree-[0-9a-f]{12}$`).MatchString(ka) {
		t.Fatalf("key %q", ka)
	}
	if k, _ := (Root{Dir: filepath.Join(base, "link")}).RuntimeKey(); k != ka {
		t.Errorf("through a symlink: %s, want %s", k, ka)
	}
	if k, _ := (Root{Dir: b}).RuntimeKey(); k == ka {
		t.Errorf("two trees share the key %s", k)
	}
	if _, err := (Root{Dir: filepath.Join(base, "none")}).RuntimeKey(); err == nil {
		t.Error("a missing tree has a key")
	}
}

// The tree's level of the runtime directory is private, and a symlink
// planted there is refused, never followed.
func TestTreeRuntimeDir(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	uid := os.Getuid()
	runtime, err := RuntimeDir(uid)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := TreeRuntimeDir(uid, "tree-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	if dir != filepath.Join(runtime, "tree-000000000001") || mode(t, dir) != os.ModeDir|0o700 {
		t.Fatalf("%s mode %v", dir, mode(t, dir))
	}
	elsewhere := t.TempDir()
	planted := filepath.Join(runtime, "tree-000000000002")
	if err := os.Symlink(elsewhere, planted); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(planted)
	if _, err := TreeRuntimeDir(uid, "tree-000000000002"); err == nil {
		t.Fatal("a symlink was taken as the tree's runtime directory")
	}
}
