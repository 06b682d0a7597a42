package fsops

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// WriteVolatile replaces a file's contents (exchanging the new file with
// the old one), creates a missing one, leaves no temporary behind, and a
// reader meanwhile sees the old or the new contents, never neither.
func TestWriteVolatileReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "status")
	if err := WriteVolatile(p, []byte("start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	bad := make(chan string, 1)
	go func() {
		for {
			select {
			case <-stop:
				close(bad)
				return
			default:
			}
			b, err := os.ReadFile(p)
			if s := string(b); err != nil || (s != "start\n" && s != "ready\n") {
				select {
				case bad <- fmt.Sprintf("%q %v", s, err):
				default:
				}
			}
		}
	}()
	for i := 0; i < 2000; i++ {
		v := "start\n"
		if i%2 == 0 {
			v = "ready\n"
		}
		if err := WriteVolatile(p, []byte(v), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if s, ok := <-bad; ok {
		t.Fatalf("a reader saw %s while the file was replaced", s)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "start\n" {
		t.Fatalf("after the writes: %q %v", b, err)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("mode after replace: %v %v", st.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d entries left, want 1 (the first: %v)", len(entries), entries[:min(len(entries), 3)])
	}
	// A symlink is refused, and its target is untouched.
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep\n"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if err := WriteVolatile(link, []byte("x\n"), 0o644); err == nil {
		t.Fatal("wrote through a symlink")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Fatalf("the symlink's target was changed: %q", b)
	}
	if l, err := os.Readlink(link); err != nil || l != target {
		t.Fatalf("the symlink was replaced: %q %v", l, err)
	}
}

// TestUmaskIsTheProcesss: Umask is the umask the process started with
// (read at initialisation, in a child started under an unusual one), and
// reading it left that umask in place.
func TestUmaskIsTheProcesss(t *testing.T) {
	if os.Getenv("CTX_UMASK_CHILD") != "" {
		after := syscall.Umask(0)
		fmt.Printf("\n%o %o\n", Umask(), after)
		os.Exit(0)
	}
	old := syscall.Umask(0o037)
	cmd := exec.Command(os.Args[0], "-test.run=^TestUmaskIsTheProcesss$")
	cmd.Env = append(os.Environ(), "CTX_UMASK_CHILD=1")
	out, err := cmd.Output()
	syscall.Umask(old)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != "37 37" {
		t.Fatalf("child's Umask and umask after it: %q, want \"37 37\"", got)
	}
}
