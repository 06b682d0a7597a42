package fsops

import (
	"os"
	"path/filepath"
	"testing"
)

// A change inside the top is seen through inotify, and a change to a
// directory above it (its mode, or a replacement) through its status:
// each is reported once by the next Changed, never missed.
func TestDirWatchSeesChangesAboveAndBelowTop(t *testing.T) {
	base := t.TempDir()
	above := filepath.Join(base, "above")
	top := filepath.Join(above, "root")
	dir := filepath.Join(top, "tool", "x.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := NewDirWatch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.AddWithAncestors(top, dir)
	if !w.Complete() {
		t.Fatal("watch incomplete")
	}
	if w.Changed(nil) {
		t.Fatal("a change reported before any")
	}
	if _, ok := w.above[above]; !ok {
		t.Fatalf("%s, above the top, is not kept by status", above)
	}
	if w.watched[above] || w.watched[base] {
		t.Fatal("a directory above the top is watched with inotify")
	}
	if !w.watched[top] || !w.watched[filepath.Join(top, "tool")] || !w.watched[dir] {
		t.Fatalf("directories at or below the top are not all watched: %v", w.watched)
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"a control written below the top", func() error { return os.WriteFile(filepath.Join(dir, "policy"), []byte("x\n"), 0o644) }},
		{"the mode of a directory above the top", func() error { return os.Chmod(above, 0o777) }},
		{"the mode put back (its change time still moved)", func() error { return os.Chmod(above, 0o755) }},
		{"a directory above the top replaced", func() error {
			if err := os.Rename(above, above+".old"); err != nil {
				return err
			}
			return os.MkdirAll(top, 0o755)
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		if !w.Changed(nil) {
			t.Fatalf("%s: not reported", s.what)
		}
		if w.Changed(nil) {
			t.Fatalf("%s: reported twice", s.what)
		}
	}
}
