package fsops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// mkTool creates dir/name with mode and returns its path.
func mkTool(t *testing.T, dir, name string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is subject to umask
		t.Fatal(err)
	}
	return p
}

func TestSplitToolPath(t *testing.T) {
	for in, want := range map[string][]string{
		"":                           nil,
		"/a:/b":                      {"/a", "/b"},
		"::/a::":                     {"/a"},
		"tool:/a:./x:.":              {"/a"},
		"/a/:/b//c":                  {"/a", "/b/c"},
		":":                          nil,
		"relative/only:also/rel":     nil,
		"/ctx/tool:/ctx/home/0/tool": {"/ctx/tool", "/ctx/home/0/tool"},
	} {
		if got := SplitToolPath(in); !reflect.DeepEqual(got, want) {
			t.Errorf("SplitToolPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLookupToolTiers(t *testing.T) {
	root := t.TempDir()
	sys, user, shared := filepath.Join(root, "tool"), filepath.Join(root, "home/0/tool"), filepath.Join(root, "shared/p/tool")
	mkTool(t, sys, "fs.read", 0o755)
	mkTool(t, user, "fs.read", 0o755)
	mkTool(t, user, "mine", 0o755)
	mkTool(t, shared, "mine", 0o755)
	mkTool(t, shared, "proj", 0o755)
	dirs := []string{sys, user, shared}

	for name, wantDir := range map[string]string{"fs.read": sys, "mine": user, "proj": shared} {
		hit, err := LookupTool(dirs, name)
		if err != nil {
			t.Fatalf("LookupTool(%s): %v", name, err)
		}
		want := filepath.Join(wantDir, name)
		if hit.Name != name || hit.Dir != wantDir || hit.Path != want || hit.ControlDir != want+".d" {
			t.Errorf("LookupTool(%s) = %+v, want path %s", name, hit, want)
		}
		if hit.Info == nil || !hit.Info.Mode().IsRegular() {
			t.Errorf("LookupTool(%s): Info = %v", name, hit.Info)
		}
	}
	// Order is the caller's: reversing the tiers reverses the winner.
	hit, err := LookupTool([]string{shared, user, sys}, "mine")
	if err != nil || hit.Dir != shared {
		t.Errorf("reversed tiers: %+v, %v", hit, err)
	}
	// A missing tier is skipped.
	hit, err = LookupTool([]string{filepath.Join(root, "nope"), user}, "mine")
	if err != nil || hit.Dir != user {
		t.Errorf("missing tier: %+v, %v", hit, err)
	}
	_, err = LookupTool(dirs, "absent")
	if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("absent tool: err = %v, want ENOENT", err)
	}
	_, err = LookupTool(nil, "fs.read")
	if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("empty CTX_PATH: err = %v, want ENOENT", err)
	}
}

func TestLookupToolModes(t *testing.T) {
	root := t.TempDir()
	first, second := filepath.Join(root, "a"), filepath.Join(root, "b")
	os.MkdirAll(first, 0o755)
	for _, tc := range []struct {
		mode os.FileMode
		hit  bool
	}{
		{0o644, false}, {0o600, false}, {0o000, false}, {0o666, false},
		{0o100, true}, {0o010, true}, {0o001, true}, {0o700, true}, {0o711, true}, {0o4755, true},
	} {
		name := fmt.Sprintf("t%04o", tc.mode)
		mkTool(t, first, name, tc.mode)
		mkTool(t, second, name, 0o755)
		hit, err := LookupTool([]string{first, second}, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := hit.Dir == first; got != tc.hit {
			t.Errorf("mode %04o: hit in first tier = %v, want %v (non-executables are not hits and do not stop the search)", tc.mode, got, tc.hit)
		}
	}
	// A directory or FIFO with an execute bit is not a tool either.
	os.Mkdir(filepath.Join(first, "adir"), 0o755)
	mkTool(t, second, "adir", 0o755)
	if err := syscall.Mkfifo(filepath.Join(first, "fifo"), 0o777); err != nil {
		t.Fatal(err)
	}
	mkTool(t, second, "fifo", 0o755)
	for _, name := range []string{"adir", "fifo"} {
		hit, err := LookupTool([]string{first, second}, name)
		if err != nil || hit.Dir != second {
			t.Errorf("%s: %+v, %v; want the regular file in the second tier", name, hit, err)
		}
	}
}

func TestLookupToolSymlinks(t *testing.T) {
	root := t.TempDir()
	first, second := filepath.Join(root, "a"), filepath.Join(root, "b")
	target := mkTool(t, filepath.Join(root, "elsewhere"), "real", 0o755)
	os.MkdirAll(first, 0o755)
	if err := os.Symlink(target, filepath.Join(first, "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := LookupTool([]string{first}, "linked"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("a symlink to an executable was a hit: %v", err)
	}
	mkTool(t, second, "linked", 0o755)
	hit, err := LookupTool([]string{first, second}, "linked")
	if err != nil || hit.Dir != second {
		t.Errorf("symlink did not fall through to the next tier: %+v, %v", hit, err)
	}
	// A symlinked CTX_PATH directory is an ordinary directory to lookup: the
	// tier is the caller's choice (the .tshrc grammar and the sandbox decide
	// which tiers exist); only the final component is never a symlink.
	if err := os.Symlink(second, filepath.Join(root, "c")); err != nil {
		t.Fatal(err)
	}
	if hit, err := LookupTool([]string{filepath.Join(root, "c")}, "linked"); err != nil || hit.Path != filepath.Join(root, "c", "linked") {
		t.Errorf("symlinked tier: %+v, %v", hit, err)
	}
	hits, _ := ListTools([]string{first})
	if len(hits) != 0 {
		t.Errorf("ListTools listed a symlink: %+v", hits)
	}
}

func TestLookupToolOwnerOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a tool another owner")
	}
	root := t.TempDir()
	// A tool only its owner (another uid) may execute is still a lookup
	// hit: lookup finds; the authority check decides who may run it.
	p := mkTool(t, root, "owned", 0o700)
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	hit, err := LookupTool([]string{root}, "owned")
	if err != nil || hit.Info.Sys().(*syscall.Stat_t).Uid != 4242 {
		t.Fatalf("owner-only tool: %+v, %v", hit, err)
	}
	hits, _ := ListTools([]string{root})
	if len(hits) != 1 || hits[0].Name != "owned" {
		t.Errorf("ListTools = %+v", hits)
	}
}

func TestLookupToolInvalidNames(t *testing.T) {
	root := t.TempDir()
	mkTool(t, root, "ok", 0o755)
	mkTool(t, root, "x.sock", 0o755)
	mkTool(t, root, "y.d", 0o755)
	mkTool(t, root, ".hidden", 0o755)
	for _, name := range []string{"", ".", "..", "../" + filepath.Base(root) + "/ok", "/bin/sh", "a/b", "x.sock", "y.d", ".hidden", "-h"} {
		_, err := LookupTool([]string{root}, name)
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("LookupTool(%q): err = %v, want EINVAL", name, err)
		}
	}
	hits, _ := ListTools([]string{root})
	if len(hits) != 1 || hits[0].Name != "ok" {
		t.Errorf("ListTools listed invalid names: %+v", hits)
	}
}

func TestListToolsTiersSortedShadowed(t *testing.T) {
	root := t.TempDir()
	sys, user := filepath.Join(root, "tool"), filepath.Join(root, "user")
	for _, n := range []string{"zeta", "fs.read", "alpha"} {
		mkTool(t, sys, n, 0o755)
	}
	for _, n := range []string{"fs.read", "beta", "aaa"} {
		mkTool(t, user, n, 0o755)
	}
	mkTool(t, user, "data", 0o644)
	os.MkdirAll(filepath.Join(sys, "fs.read.d"), 0o755)
	hits, truncated := ListTools([]string{sys, filepath.Join(root, "missing"), user})
	var got []string
	for _, h := range hits {
		got = append(got, h.Path[len(root)+1:])
	}
	want := []string{"tool/alpha", "tool/fs.read", "tool/zeta", "user/aaa", "user/beta"}
	if truncated || !reflect.DeepEqual(got, want) {
		t.Errorf("ListTools = %q (truncated %v), want %q", got, truncated, want)
	}
	if hits[1].ControlDir != filepath.Join(sys, "fs.read.d") {
		t.Errorf("control dir = %s", hits[1].ControlDir)
	}
}

func TestListToolsBounded(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	os.MkdirAll(a, 0o755)
	os.MkdirAll(b, 0o755)
	// Exactly MaxListedTools in the first tier: complete, not truncated.
	for i := 0; i < MaxListedTools; i++ {
		mkTool(t, a, fmt.Sprintf("t%04d", i), 0o755)
	}
	hits, truncated := ListTools([]string{a})
	if len(hits) != MaxListedTools || truncated {
		t.Fatalf("exactly %d tools: got %d, truncated %v", MaxListedTools, len(hits), truncated)
	}
	// One more tool in a later tier: the listing stops and says so.
	mkTool(t, b, "extra", 0o755)
	mkTool(t, b, "t0000", 0o755) // shadowed, does not count
	hits, truncated = ListTools([]string{a, b})
	if len(hits) != MaxListedTools || !truncated {
		t.Fatalf("%d+1 tools: got %d, truncated %v", MaxListedTools, len(hits), truncated)
	}
	if hits[0].Name != "t0000" || hits[MaxListedTools-1].Name != "t1023" {
		t.Errorf("first/last = %s/%s", hits[0].Name, hits[MaxListedTools-1].Name)
	}
	// Shadowed duplicates alone never truncate.
	hits, truncated = ListTools([]string{a, a})
	if len(hits) != MaxListedTools || truncated {
		t.Errorf("duplicate tier: got %d, truncated %v", len(hits), truncated)
	}
}

func TestReadControls(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "description"), []byte("reads\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "schema"))
	got, err := ReadControls(dir, []string{"description", "cap"})
	if err != nil || string(got["description"]) != "reads\n" || len(got) != 1 {
		t.Errorf("ReadControls = %q, %v", got, err)
	}
	if _, err := ReadControls(dir, []string{"schema"}); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("symlinked control: err = %v, want ELOOP", err)
	}
}
