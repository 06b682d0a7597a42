package fsops

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// withRunBase lays /run out in a temporary directory for one test.
func withRunBase(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	old := runBase
	runBase = base
	t.Cleanup(func() { runBase = old })
	t.Setenv("TMPDIR", t.TempDir())
	return base
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode() & (os.ModePerm | os.ModeSticky | os.ModeSymlink | os.ModeDir)
}

// The terminal sockets live where the seed and DESIGN §8 put them:
// /run/user/UID/cortexfs/terminal/TREE/AGENT/SESSION/main.sock, and without a
// per-user runtime directory /run/cortexfs/terminal/UID/TREE/AGENT/SESSION/main.sock.
func TestTerminalDirPaths(t *testing.T) {
	uid := os.Getuid()
	id := strconv.Itoa(uid)

	base := withRunBase(t)
	dir, err := TerminalDir(uid)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "cortexfs", "terminal", id); dir != want {
		t.Fatalf("without /run/user/UID: %s, want %s", dir, want)
	}
	if got := TerminalSocketPath(dir, "tree-0123456789ab", "coder", "default"); got != filepath.Join(base, "cortexfs/terminal", id, "tree-0123456789ab/coder/default/main.sock") {
		t.Errorf("socket %s", got)
	}
	// The shared levels are sticky like /tmp, the user's own is private.
	for p, want := range map[string]os.FileMode{
		filepath.Join(base, "cortexfs"):             os.ModeDir | os.ModeSticky | 0o777,
		filepath.Join(base, "cortexfs", "terminal"): os.ModeDir | os.ModeSticky | 0o777,
		dir: os.ModeDir | 0o700,
	} {
		if got := mode(t, p); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	// Idempotent.
	if again, err := TerminalDir(uid); err != nil || again != dir {
		t.Errorf("again: %s %v", again, err)
	}

	base = withRunBase(t)
	if err := os.MkdirAll(filepath.Join(base, "user", id), 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err = TerminalDir(uid)
	if want := filepath.Join(base, "user", id, "cortexfs", "terminal"); err != nil || dir != want {
		t.Fatalf("with /run/user/UID: %s %v, want %s", dir, err, want)
	}
	if got := mode(t, dir); got != os.ModeDir|0o700 {
		t.Errorf("%s: mode %v", dir, got)
	}
	if _, err := os.Lstat(filepath.Join(base, "cortexfs")); !os.IsNotExist(err) {
		t.Errorf("/run/cortexfs made although /run/user/UID exists: %v", err)
	}
}

// A directory on the way that another user could change is never used:
// the next candidate is taken instead, and the suspect one is left as it
// was.
func TestTerminalDirRefusesUnsafeComponents(t *testing.T) {
	uid := os.Getuid()
	id := strconv.Itoa(uid)
	cases := []struct {
		name  string
		plant func(t *testing.T, base string)
		why   string
	}{
		{"shared level writable and not sticky", func(t *testing.T, base string) {
			mustMkdir(t, filepath.Join(base, "cortexfs", "terminal"), 0o777)
		}, "writable by others"},
		{"the user's level a symlink", func(t *testing.T, base string) {
			mustMkdir(t, filepath.Join(base, "cortexfs", "terminal"), 0o755)
			elsewhere := t.TempDir()
			if err := os.Symlink(elsewhere, filepath.Join(base, "cortexfs", "terminal", id)); err != nil {
				t.Fatal(err)
			}
		}, "symlink"},
		{"the user's level not private", func(t *testing.T, base string) {
			mustMkdir(t, filepath.Join(base, "cortexfs", "terminal", id), 0o755)
		}, "private"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := withRunBase(t)
			tc.plant(t, base)
			before := snapshotModes(t, base)
			dir, err := TerminalDir(uid)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(os.Getenv("TMPDIR"), "cortexfs-"+id, "terminal"); dir != want {
				t.Fatalf("got %s, want the fallback %s", dir, want)
			}
			if after := snapshotModes(t, base); after != before {
				t.Errorf("the refused tree changed:\n%s\nwas\n%s", after, before)
			}
			_, err = makeTerminalDir(base, []string{"cortexfs/", "terminal/", id}, uid)
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("refusal %v, want it to say %q", err, tc.why)
			}
		})
	}
	if os.Getuid() != 0 {
		return
	}
	t.Run("a level owned by another user", func(t *testing.T) {
		base := withRunBase(t)
		mustMkdir(t, filepath.Join(base, "cortexfs"), 0o1777)
		mustMkdir(t, filepath.Join(base, "cortexfs", "terminal"), 0o1777)
		os.Chown(filepath.Join(base, "cortexfs", "terminal"), 65534, 65534)
		dir, err := TerminalDir(uid)
		if err != nil || strings.HasPrefix(dir, base) {
			t.Fatalf("got %s %v, want a fallback outside %s", dir, err, base)
		}
	})
}

func mustMkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The sticky bit in a numeric mode is syscall's, not os.FileMode's.
	if err := syscall.Chmod(dir, uint32(mode)); err != nil {
		t.Fatal(err)
	}
}

// snapshotModes lists every path under base with its mode.
func snapshotModes(t *testing.T, base string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			b.WriteString(p + " " + info.Mode().String() + "\n")
		}
		return nil
	})
	return b.String()
}
