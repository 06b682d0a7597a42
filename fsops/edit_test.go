package fsops

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Edits at once, of an existing control and of one each edit may be the
// first to create, lose nothing: each sees the others' results.
func TestEditControlConcurrent(t *testing.T) {
	for _, existing := range []bool{true, false} {
		dir := t.TempDir()
		p := filepath.Join(dir, "policy")
		if existing {
			if err := os.WriteFile(p, []byte("first\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		const n = 24
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, err := EditControl(p, true, func(old []byte) ([]byte, error) {
					time.Sleep(time.Millisecond) // room for the others to race
					return append(old, fmt.Sprintf("line %d\n", i)...), nil
				})
				if err != nil {
					t.Error(err)
				}
			}(i)
		}
		wg.Wait()
		b, _ := os.ReadFile(p)
		for i := 0; i < n; i++ {
			if !strings.Contains(string(b), fmt.Sprintf("line %d\n", i)) {
				t.Fatalf("existing=%v: line %d lost:\n%s", existing, i, b)
			}
		}
	}
}

// A running agent's run host holds its control directory's flock for the
// whole run: an edit of its policy must not wait for the run to end (a
// grant revoked mid-run, DESIGN §17).
func TestEditControlBesideRunLock(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "policy")
	if err := os.WriteFile(p, []byte("allow a_t network:x.example connect\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if err := TryLock(run); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := EditControl(p, false, func([]byte) ([]byte, error) { return nil, nil })
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		unix.Flock(int(run.Fd()), unix.LOCK_UN)
		t.Fatal("the edit waited for the directory's lock (the run lock)")
	}
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Fatalf("policy after the edit: %q", b)
	}
}
