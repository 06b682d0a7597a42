package fsops

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A sweep removes what no living process holds, and nothing else: not a
// held directory, not a symlink's target, not a name it was not asked
// about, not a directory being made right now.
func TestSweepUnheld(t *testing.T) {
	parent := t.TempDir()
	isRun := func(name string) bool { return len(name) == 8 && name[:4] == "run-" }
	mkfile := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	held, err := MakeHeldDir(parent, "run-live", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	mkfile(filepath.Join(parent, "run-live", "policy"))
	// A host that died: its directory was held by a file now closed.
	dead, err := MakeHeldDir(parent, "run-dead", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	mkfile(filepath.Join(parent, "run-dead", "sub", "audit"))
	dead.Close()
	// A symlink named like a run, to a directory of someone else's.
	other := t.TempDir()
	mkfile(filepath.Join(other, "keep"))
	if err := os.Symlink(other, filepath.Join(parent, "run-link")); err != nil {
		t.Fatal(err)
	}
	// A name the sweep was not asked about, and a plain file named like a run.
	mkfile(filepath.Join(parent, "notarun", "keep"))
	mkfile(filepath.Join(parent, "run-file"))
	// A directory a maker has not renamed yet: too recent to be a leftover.
	mkfile(filepath.Join(parent, heldPrefix+"run-made", "keep"))

	swept := SweepUnheld(parent, isRun)
	if !slices.Equal(swept, []string{"run-dead"}) {
		t.Errorf("swept %q, want only run-dead", swept)
	}
	for _, gone := range []string{"run-dead"} {
		if _, err := os.Lstat(filepath.Join(parent, gone)); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", gone, err)
		}
	}
	for _, kept := range []string{"run-live/policy", "run-link", "notarun/keep", "run-file", heldPrefix + "run-made/keep"} {
		if _, err := os.Lstat(filepath.Join(parent, kept)); err != nil {
			t.Errorf("%s removed: %v", kept, err)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "keep")); err != nil {
		t.Errorf("the symlink's target lost its file: %v", err)
	}

	// A leftover unchanged for heldQuiet is its maker's, who died between
	// mkdir and rename.
	defer func(q time.Duration) { heldQuiet = q }(heldQuiet)
	heldQuiet = 0
	if swept := SweepUnheld(parent, isRun); !slices.Equal(swept, []string{"run-made"}) {
		t.Errorf("second sweep removed %q, want the leftover run-made", swept)
	}
	if _, err := os.Lstat(filepath.Join(parent, "run-live", "policy")); err != nil {
		t.Errorf("the held directory was removed: %v", err)
	}
}

// MakeHeldDir refuses a name that is taken and leaves no temporary, with
// RENAME_NOREPLACE and without it (NFS).
func TestMakeHeldDirRefusesTaken(t *testing.T) {
	t.Run("noreplace", testMakeHeldDirRefusesTaken)
	t.Run("fallback", func(t *testing.T) {
		was := noReplaceOff.Load()
		noReplaceOff.Store(true)
		defer noReplaceOff.Store(was)
		testMakeHeldDirRefusesTaken(t)
	})
}

func testMakeHeldDirRefusesTaken(t *testing.T) {
	parent := t.TempDir()
	if err := os.Mkdir(filepath.Join(parent, "run-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if f, err := MakeHeldDir(parent, "run-1", 0o755); err == nil {
		f.Close()
		t.Fatal("made a held directory over an existing one")
	}
	names, _ := DirNames(parent)
	if !slices.Equal(names, []string{"run-1"}) {
		t.Errorf("parent holds %q after the refusal", names)
	}
	if st, _ := os.Stat(filepath.Join(parent, "run-1")); st.Mode().Perm() != 0o700 {
		t.Errorf("the existing directory's mode changed: %v", st.Mode())
	}
	// And makes its mode whatever the umask.
	f, err := MakeHeldDir(parent, "run-2", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, _ := os.Stat(filepath.Join(parent, "run-2")); st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", st.Mode().Perm())
	}
}
