package fsops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestDirNames compares DirNames with os.ReadDir on an empty directory
// and on one whose entries take several getdents buffers, and checks
// the errors for a file and a missing path.
func TestDirNames(t *testing.T) {
	dir := t.TempDir()
	if names, err := DirNames(dir); err != nil || len(names) != 0 {
		t.Fatalf("empty directory: %q, %v", names, err)
	}
	for i := 0; i < 600; i++ {
		name := fmt.Sprintf("%03d-%s", i, strings.Repeat("x", i%40))
		if i%3 == 0 {
			os.Mkdir(filepath.Join(dir, name), 0o755)
		} else if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := DirNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var want []string
	for _, e := range entries {
		want = append(want, e.Name())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("DirNames: %d names, os.ReadDir %d", len(got), len(want))
	}
	if _, err := DirNames(filepath.Join(dir, "001-x")); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("a file: %v, want ENOTDIR", err)
	}
	if _, err := DirNames(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing path: %v, want ENOENT", err)
	}
}
