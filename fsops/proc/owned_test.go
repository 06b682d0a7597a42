package proc

import (
	"os"
	"path/filepath"
	"testing"
)

// Another user's link and a directory others may write (not sticky) are
// each found; the caller's own tree, even below a sticky /tmp, is not.
func TestOthersMayChange(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make files of another user")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	mine := filepath.Join(dir, "mine", "bin")
	os.MkdirAll(mine, 0o755)
	os.WriteFile(filepath.Join(mine, "tool"), nil, 0o755)
	if at, bad := OthersMayChange(filepath.Join(mine, "tool"), 0); bad {
		t.Fatalf("root's own tree: changed by others at %s", at)
	}
	theirs := filepath.Join(dir, "theirs")
	os.Mkdir(theirs, 0o755)
	os.Symlink("/etc/hostname", filepath.Join(theirs, "link"))
	os.Lchown(filepath.Join(theirs, "link"), 4242, 4242)
	if at, bad := OthersMayChange(filepath.Join(theirs, "link"), 0); !bad || at != filepath.Join(theirs, "link") {
		t.Fatalf("another user's link: %q %v", at, bad)
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o777)
	os.WriteFile(filepath.Join(open, "f"), nil, 0o644)
	if at, bad := OthersMayChange(filepath.Join(open, "f"), 0); !bad || at != open {
		t.Fatalf("a file in a world-writable directory: %q %v", at, bad)
	}
	if at, bad := OthersMayChange(filepath.Join(dir, "missing"), 0); !bad || at != filepath.Join(dir, "missing") {
		t.Fatalf("a missing path: %q %v", at, bad)
	}
}

// A whole tree: an entry deep in it owned by another user, or writable by
// others, is found, a link by its owner alone; the person's own tree with
// a root-owned sticky directory in it is not.
func TestTreeOthersMayChange(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make files of another user")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	tree := filepath.Join(dir, ".volta")
	deep := filepath.Join(tree, "tools", "image", "node", "20.0.0", "bin")
	os.MkdirAll(deep, 0o755)
	os.WriteFile(filepath.Join(deep, "node"), nil, 0o755)
	os.Symlink("/nowhere", filepath.Join(deep, "npm"))
	os.Mkdir(filepath.Join(tree, "tmp"), 0o755)
	os.Chmod(filepath.Join(tree, "tmp"), os.ModeSticky|0o777)
	if at, bad := TreeOthersMayChange(tree, 0); bad {
		t.Fatalf("the person's tree: changed by others at %s", at)
	}
	os.Lchown(filepath.Join(deep, "npm"), 4242, 4242)
	if at, bad := TreeOthersMayChange(tree, 0); !bad || at != filepath.Join(deep, "npm") {
		t.Fatalf("another user's link deep in it: %q %v", at, bad)
	}
	os.Lchown(filepath.Join(deep, "npm"), 0, 0)
	os.Chmod(filepath.Join(deep, "node"), 0o775)
	if at, bad := TreeOthersMayChange(tree, 0); !bad || at != filepath.Join(deep, "node") {
		t.Fatalf("a file its group may write: %q %v", at, bad)
	}
	os.Chmod(filepath.Join(deep, "node"), 0o755)
	os.Chown(filepath.Join(tree, "tools"), 4242, 4242)
	if at, bad := TreeOthersMayChange(deep, 0); !bad || at != filepath.Join(tree, "tools") {
		t.Fatalf("another user's directory above: %q %v", at, bad)
	}
	if at, bad := TreeOthersMayChange(filepath.Join(dir, "missing"), 0); !bad || at != filepath.Join(dir, "missing") {
		t.Fatalf("a missing tree: %q %v", at, bad)
	}
}
