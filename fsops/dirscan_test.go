package fsops

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"ctx/policy"
)

// TestDirScanMatchesReadDir holds the scanner to os.ReadDir: every name,
// directories as IsDir says (a symlink to a directory is none), across
// more names than one getdents buffer holds.
func TestDirScanMatchesReadDir(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 1500; i++ {
		name := filepath.Join(dir, "file-with-a-longish-name-"+strconv.Itoa(i))
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"sub", ".git", "objects"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	os.Symlink("sub", filepath.Join(dir, "link-to-dir"))
	want := map[string]bool{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		want[e.Name()] = e.IsDir()
	}
	var s DirScanner
	got := map[string]bool{}
	uid, mode, err := s.Scan(dir, func(name []byte, isDir bool) { got[string(name)] = isDir })
	if err != nil || mode&unix.S_IFMT != unix.S_IFDIR || uid != uint32(os.Getuid()) {
		t.Fatalf("Scan: uid %d mode %o err %v", uid, mode, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d names, want %d", len(got), len(want))
	}
	for n, d := range want {
		if g, ok := got[n]; !ok || g != d {
			t.Errorf("%s: got %v (listed %v), want dir=%v", n, g, ok, d)
		}
	}
	sk, _, _, err := s.Sketch(dir, map[string]bool{"objects": true, "HEAD": true, "link-to-dir": true})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(sk.Subdirs)
	if !slices.Equal(sk.Subdirs, []string{"objects", "sub"}) || !sk.Found["objects"] || sk.Has("HEAD") || !sk.Has("link-to-dir") || sk.Found["link-to-dir"] {
		t.Errorf("sketch %+v", sk)
	}
	// dir itself a symlink: never followed
	if _, mode, err := s.Scan(filepath.Join(dir, "link-to-dir"), func([]byte, bool) {}); err == nil || mode != 0 {
		t.Errorf("a symlink was listed: mode %o err %v", mode, err)
	}
}

// TestCensusEndIgnoresStartListings: the end's census lists every
// directory afresh. Listings the start's search made (Known) are stale by
// then: a hook planted in a directory created since, or in one listed
// before the run, is found all the same.
func TestCensusEndIgnoresStartListings(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "a"), 0o755)
	set := policy.EffectiveProtect(nil)
	start := TakeProtectCensus(ws, set, nil, true, nil)
	known := map[string]DirSketch{"": {Subdirs: []string{"a"}}, "a": {}}
	// the run plants a repository's hook and a new project
	os.MkdirAll(filepath.Join(ws, "a", ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, "a", ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\n"), 0o755)
	os.MkdirAll(filepath.Join(ws, "b", ".vscode"), 0o755)
	os.WriteFile(filepath.Join(ws, "b", ".vscode", "tasks.json"), []byte("{}"), 0o644)
	var found []string
	end := &ProtectCensus{Workspace: ws, Set: set, Known: known, Visit: func(rel string, _ *ProtectItem) { found = append(found, rel) }}
	end.Walk()
	slices.Sort(found)
	if !slices.Contains(found, "a/.git/hooks/pre-commit") || !slices.Contains(found, "b/.vscode/tasks.json") || len(start.Items) != 0 {
		t.Fatalf("the end found %v (the start %d items)", found, len(start.Items))
	}
	// at the start the same listings are taken as made
	again := TakeProtectCensus(ws, set, nil, true, known)
	if len(again.Items) != 0 {
		t.Errorf("the start census did not take the listings it was given: %d items", len(again.Items))
	}
}

// FuzzScanDirents: any buffer, however malformed, ends the scan without
// a panic, and every name handed over is non-empty, holds no NUL and is
// neither . nor ...
func FuzzScanDirents(f *testing.F) {
	rec := func(name string, typ byte) []byte {
		n := 19 + len(name) + 1
		n = (n + 7) &^ 7
		b := make([]byte, n)
		binary.NativeEndian.PutUint16(b[16:18], uint16(n))
		b[18] = typ
		copy(b[19:], name)
		return b
	}
	f.Add(append(rec(".", unix.DT_DIR), rec("a", unix.DT_REG)...))
	f.Add(rec("sub", unix.DT_DIR))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		scanDirents(-1, b, func(name []byte, isDir bool) {
			if len(name) == 0 || bytes.IndexByte(name, 0) >= 0 || string(name) == "." || string(name) == ".." {
				t.Fatalf("name %q", name)
			}
		})
	})
}
