package mcpstdio

import (
	"os"
	"path/filepath"
	"testing"

	"ctx/fsops"
)

// watchedTools is a PathTools over dirs that keeps its listing
// (Revision), and a check of the listing it gives now; decided counts
// the listings made afresh.
func watchedTools(t *testing.T, dirs ...string) (*PathTools, func(want string), *int) {
	decided := 0
	p := &PathTools{Dirs: dirs, Revision: func() string { return "r" },
		Visibility: func() func(fsops.ToolHit) bool { decided++; return func(fsops.ToolHit) bool { return true } }}
	return p, listingCheck(t, p), &decided
}

// listingCheck checks the listing p gives now against want, written as
// "NAME=DESCRIPTION;" per tool.
func listingCheck(t *testing.T, p *PathTools) func(want string) {
	return func(want string) {
		t.Helper()
		tools, err := p.Tools()
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, tl := range tools {
			got += tl.Name + "=" + tl.Description + ";"
		}
		if got != want {
			t.Fatalf("listing %q, want %q", got, want)
		}
	}
}

func writeFile(t *testing.T, p, s string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
}

// TestListingWatchKeepsUpWithTheTree: a listing kept on the watch's word
// (no status compared) is read afresh after every change that can change
// it: a control directory made for a tool that had none, one removed and
// made again (and then written in place: the new directory is watched), a
// directory searched that did not exist when the first listing was made.
// The tool's log, which every call appends to, changes nothing.
func TestListingWatchKeepsUpWithTheTree(t *testing.T) {
	base := t.TempDir()
	dir, later := filepath.Join(base, "tool"), filepath.Join(base, "later", "tool")
	writeFile(t, filepath.Join(dir, "alpha"), "#!/bin/sh\n", 0o755)
	p, describe, decided := watchedTools(t, dir, later)
	describe("alpha=;")
	if p.watch.w == nil || !p.watch.w.Complete() || p.watch.partial {
		t.Fatal("no complete watch of the listing")
	}
	writeFile(t, filepath.Join(dir, "alpha.d", "log"), "a call\n", 0o644)
	describe("alpha=;")
	writeFile(t, filepath.Join(dir, "alpha.d", "description"), "made\n", 0o644)
	describe("alpha=made;")
	n := *decided
	writeFile(t, filepath.Join(dir, "alpha.d", "log"), "a call\nanother\n", 0o644)
	describe("alpha=made;")
	if *decided != n {
		t.Errorf("the tool's log changed the listing (%d listings, want %d)", *decided, n)
	}
	if err := os.RemoveAll(filepath.Join(dir, "alpha.d")); err != nil {
		t.Fatal(err)
	}
	describe("alpha=;")
	writeFile(t, filepath.Join(dir, "alpha.d", "description"), "again\n", 0o644)
	describe("alpha=again;")
	f, err := os.OpenFile(filepath.Join(dir, "alpha.d", "description"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("in place\n")
	f.Close()
	describe("alpha=in place;")
	writeFile(t, filepath.Join(later, "beta"), "#!/bin/sh\n", 0o755)
	describe("alpha=in place;beta=;")
}

// TestListingWatchNotOverALink: a directory searched that is a symlink
// cannot be watched (inotify follows no link here): every listing is then
// compared by status, and a change behind the link is still seen.
func TestListingWatchNotOverALink(t *testing.T) {
	base := t.TempDir()
	real, link := filepath.Join(base, "real"), filepath.Join(base, "link")
	writeFile(t, filepath.Join(real, "alpha"), "#!/bin/sh\n", 0o755)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	p, describe, _ := watchedTools(t, link)
	describe("alpha=;")
	if !p.watch.partial {
		t.Error("a directory behind a symlink is taken as watched")
	}
	writeFile(t, filepath.Join(real, "alpha.d", "description"), "behind\n", 0o644)
	describe("alpha=behind;")
}
