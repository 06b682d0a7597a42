package fsops

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// WriteAt with NoReplace refuses any entry at the name, a dangling
// symlink included, and leaves no temporary; without it, it replaces the
// file. The mode is the one asked whatever the umask.
func TestWriteAtNoReplace(t *testing.T) {
	dir := t.TempDir()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	os.Symlink("/nonexistent", filepath.Join(dir, "link"))
	if err := WriteAt(dfd, "link", []byte("x"), &WriteOpts{Mode: 0o644, NoReplace: true}); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("over a dangling symlink: %v, want EEXIST", err)
	}
	var steps []string
	o := &WriteOpts{Mode: 0o666, NoReplace: true, Step: func(s string) { steps = append(steps, s) }}
	if err := WriteAt(dfd, "new", []byte("one"), o); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 || steps[0] != "created" || steps[2] != "synced" {
		t.Errorf("steps %v", steps)
	}
	if err := WriteAt(dfd, "new", []byte("two"), &WriteOpts{Mode: 0o666}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "new"))
	st, _ := os.Stat(filepath.Join(dir, "new"))
	if string(b) != "two" || st.Mode().Perm() != 0o666 {
		t.Errorf("new: %q %v", b, st.Mode())
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 2 {
		t.Errorf("left behind: %v", names)
	}
	if err := WriteNew(filepath.Join(dir, "link"), []byte("x"), 0o644); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("WriteNew over a dangling symlink: %v", err)
	}
}

func TestTempNameParses(t *testing.T) {
	target, pid, ok := ParseTempName(filepath.Base(TempName("/d/job.result")))
	if !ok || target != "job.result" || pid != os.Getpid() {
		t.Fatalf("%q %d %v", target, pid, ok)
	}
	for _, bad := range []string{"job", ".job.tmp-1-abc", ".job.tmp-01-0123456789ab", ".tmp-1-0123456789ab"} {
		if _, _, ok := ParseTempName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
