package mcpstdio

import (
	"os"
	"path/filepath"
	"testing"

	"ctx/fsops"
)

// TestListingReuseFollowsFiles: with a Revision, Tools reuses its listing
// only while nothing it read changed: a description written in place, a
// control added, a tool removed and a new revision each give a fresh
// listing; an unchanged tree gives the same one without deciding again.
func TestListingReuseFollowsFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string, mode os.FileMode) { writeFile(t, p, s, mode) }
	write(filepath.Join(dir, "alpha"), "#!/bin/sh\n", 0o755)
	write(filepath.Join(dir, "alpha.d", "description"), "first words\n", 0o644)
	write(filepath.Join(dir, "beta"), "#!/bin/sh\n", 0o755)
	write(filepath.Join(dir, "beta.d", "description"), "beta\n", 0o644)
	revision, decided := "r1", 0
	p := &PathTools{Dirs: []string{dir}, Revision: func() string { return revision },
		Visibility: func() func(fsops.ToolHit) bool { decided++; return func(fsops.ToolHit) bool { return true } }}
	describe := listingCheck(t, p)
	describe("alpha=first words;beta=beta;")
	describe("alpha=first words;beta=beta;")
	if decided != 1 {
		t.Fatalf("an unchanged tree was decided %d times, want once", decided)
	}
	// In place: same inode, same directory; only the file's times move.
	f, err := os.OpenFile(filepath.Join(dir, "alpha.d", "description"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("second words\n")
	f.Close()
	describe("alpha=second words;beta=beta;")
	write(filepath.Join(dir, "beta.d", "cap"), "terminal\n", 0o644)
	describe("alpha=second words;")
	os.Remove(filepath.Join(dir, "alpha"))
	describe("")
	write(filepath.Join(dir, "alpha"), "#!/bin/sh\n", 0o755)
	before := decided
	revision = "r2"
	describe("alpha=second words;")
	if decided == before {
		t.Fatal("a new revision did not decide again")
	}
}
