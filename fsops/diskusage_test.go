package fsops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiskUsage: what a home holds is its blocks, each inode once; a
// symlink to a large file elsewhere, a sparse file's hole and the skipped
// session records do not count, a file does whatever it is named.
func TestDiskUsage(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	for _, d := range []string{"data/a/b", "cache", "session"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	empty, err := DiskUsage(home, "session")
	if err != nil {
		t.Fatal(err)
	}
	mib := make([]byte, 1<<20)
	for i := range mib {
		mib[i] = byte(i) | 1
	}
	write := func(p string) {
		if err := os.WriteFile(filepath.Join(home, p), mib, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("data/a/b/one")
	write("session/events") // the run host's: skipped
	os.WriteFile(filepath.Join(base, "outside"), append(mib, mib...), 0o644)
	os.Symlink(filepath.Join(base, "outside"), filepath.Join(home, "cache/link"))
	os.Symlink(base, filepath.Join(home, "cache/dirlink"))
	os.Link(filepath.Join(home, "data/a/b/one"), filepath.Join(home, "cache/hard"))
	sparse, _ := os.Create(filepath.Join(home, "data/sparse"))
	sparse.Truncate(1 << 30)
	sparse.Close()
	got, err := DiskUsage(home, "session")
	if err != nil {
		t.Fatal(err)
	}
	if d := got - empty; d < 1<<20 || d > 1<<20+64<<10 {
		t.Errorf("home holds %d more bytes after 1 MiB written once (hard link, symlinks, a 1 GiB hole, session)", d)
	}
	if n, err := DiskUsage(filepath.Join(base, "absent")); n != 0 || err != nil {
		t.Errorf("absent: %d %v", n, err)
	}
	if _, err := DiskUsage(filepath.Join(home, "cache/dirlink")); err == nil {
		t.Errorf("a symlink as the home was followed")
	}
}

// TestDiskUsageTooDeep: a home nested past MaxDiskDepth is an error, not
// a partial count an agent could hide data below.
func TestDiskUsageTooDeep(t *testing.T) {
	home := t.TempDir()
	dir := home + strings.Repeat("/d", MaxDiskDepth+1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := DiskUsage(home); err == nil || !strings.Contains(err.Error(), "deeper than") {
		t.Errorf("err %v", err)
	}
}
