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
