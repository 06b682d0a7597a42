package queue

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// bait is a directory outside the queue with a file in it; snapshot
// records every name, mode and byte below it so a test can prove an attack
// left it untouched.
type bait struct{ dir, file string }

func newBait(t *testing.T) bait {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "target")
	if err := os.WriteFile(file, []byte("precious bytes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "worker"), []byte("not a lease\n"), 0o600)
	return bait{dir, file}
}

func (b bait) snapshot(t *testing.T) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(b.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Lstat(p)
		data, _ := os.ReadFile(p)
		lines = append(lines, fmt.Sprintf("%s %v %q", strings.TrimPrefix(p, b.dir), st.Mode(), data))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (b bait) untouched(t *testing.T, before string) {
	t.Helper()
	if after := b.snapshot(t); after != before {
		t.Fatalf("bait changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestSymlinkedQueueDirectories replaces each directory on the way to and
// inside the queue with a symlink to a bait directory: opening the queue
// and creating the space refuse with ELOOP and the bait is untouched.
func TestSymlinkedQueueDirectories(t *testing.T) {
	dirs := append([]string{"shared", "shared/proj", "shared/proj/queue"}, func() []string {
		var out []string
		for _, d := range StateDirs {
			out = append(out, "shared/proj/queue/"+d)
		}
		return out
	}()...)
	for _, rel := range dirs {
		t.Run(rel, func(t *testing.T) {
			root, q := newQueue(t, "")
			q.Close()
			b := newBait(t)
			before := b.snapshot(t)
			p := filepath.Join(root, rel)
			if err := os.Rename(p, p+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(b.dir, p); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(root, "proj"); !errors.Is(err, unix.ELOOP) {
				t.Fatalf("Open through symlinked %s: %v", rel, err)
			}
			if _, _, err := CreateSpace(root, "proj"); !errors.Is(err, unix.ELOOP) {
				t.Fatalf("CreateSpace through symlinked %s: %v", rel, err)
			}
			b.untouched(t, before)
		})
	}
}

// TestSymlinkedNames plants symlinks at job, claim, lease, result and log
// names. No operation follows one: each refuses or skips, and the bait's
// bytes stay as they were.
func TestSymlinkedNames(t *testing.T) {
	const J = "j.req.json"
	type tc struct {
		name string
		// plant sets up the queue (q holds J in some state) and plants.
		plant func(t *testing.T, root string, q *Queue, b bait)
		// attack runs operations that must not follow the link.
		attack func(t *testing.T, root string, q *Queue)
	}
	claimJ := func(t *testing.T, q *Queue) {
		mustPublish(t, q, J)
		if _, _, err := q.Claim(Owner{Worker: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []tc{
		{"pending/J -> file", func(t *testing.T, root string, q *Queue, b bait) {
			os.Symlink(b.file, qpath(root, "pending", J))
		}, func(t *testing.T, root string, q *Queue) {
			if _, _, err := q.Claim(Owner{Worker: "w"}); !errors.Is(err, ErrEmpty) {
				t.Fatalf("claim: %v", err)
			}
			if _, err := q.Publish(J, []byte(`{}`)); !errors.Is(err, ErrConflict) {
				t.Fatalf("publish: %v", err)
			}
			if _, err := q.Recover(J, true); !errors.Is(err, ErrNotFound) {
				t.Fatalf("recover: %v", err)
			}
		}},
		{"pending/J -> file, job claimed", func(t *testing.T, root string, q *Queue, b bait) {
			claimJ(t, q)
			os.Symlink(b.file, qpath(root, "pending", J))
		}, func(t *testing.T, root string, q *Queue) {
			if _, err := q.Recover(J, true); !errors.Is(err, ErrConflict) {
				t.Fatalf("recover: %v", err)
			}
			mustState(t, q, J, StateClaimed)
		}},
		{"claimed/J -> dir", func(t *testing.T, root string, q *Queue, b bait) {
			mustPublish(t, q, J)
			os.Symlink(b.dir, qpath(root, "claimed", J))
		}, func(t *testing.T, root string, q *Queue) {
			if _, _, err := q.Claim(Owner{Worker: "w"}); !errors.Is(err, ErrEmpty) {
				t.Fatalf("claim: %v", err)
			}
			if _, err := q.Finish(J, Done, []byte("x"), FinishOptions{}); !errors.Is(err, ErrConflict) {
				t.Fatalf("finish: %v", err)
			}
			if _, err := q.ReadRequest(J); !errors.Is(err, unix.ELOOP) {
				t.Fatalf("read: %v", err)
			}
			mustState(t, q, J, StatePending)
		}},
		{"claimed/J/J -> file", func(t *testing.T, root string, q *Queue, b bait) {
			claimJ(t, q)
			os.Remove(qpath(root, "claimed", J, J))
			os.Symlink(b.file, qpath(root, "claimed", J, J))
		}, func(t *testing.T, root string, q *Queue) {
			if _, err := q.Finish(J, Done, []byte("x"), FinishOptions{}); !errors.Is(err, ErrConflict) {
				t.Fatalf("finish: %v", err)
			}
			if _, err := q.ReadRequest(J); !errors.Is(err, unix.ELOOP) {
				t.Fatalf("read: %v", err)
			}
			if _, err := q.Recover(J, true); !errors.Is(err, ErrConflict) {
				t.Fatalf("recover: %v", err)
			}
		}},
		{"lease/J -> dir", func(t *testing.T, root string, q *Queue, b bait) {
			claimJ(t, q)
			os.Remove(qpath(root, "lease", J, "worker"))
			os.Remove(qpath(root, "lease", J))
			os.Symlink(b.dir, qpath(root, "lease", J))
		}, func(t *testing.T, root string, q *Queue) {
			if _, err := q.Finish(J, Done, []byte("x"), FinishOptions{}); !errors.Is(err, ErrConflict) {
				t.Fatalf("finish: %v", err)
			}
			if _, err := q.Recover(J, true); !errors.Is(err, ErrConflict) {
				t.Fatalf("recover: %v", err)
			}
			mustState(t, q, J, StateUnleasedClaim)
		}},
		{"lease/J -> dir, job pending", func(t *testing.T, root string, q *Queue, b bait) {
			mustPublish(t, q, J)
			os.Symlink(b.dir, qpath(root, "lease", J))
		}, func(t *testing.T, root string, q *Queue) {
			if _, _, err := q.Claim(Owner{Worker: "w"}); !errors.Is(err, ErrEmpty) {
				t.Fatalf("claim: %v", err)
			}
			mustState(t, q, J, StatePending)
		}},
		{"lease/J/worker -> file", func(t *testing.T, root string, q *Queue, b bait) {
			claimJ(t, q)
			os.Remove(qpath(root, "lease", J, "worker"))
			os.Symlink(b.file, qpath(root, "lease", J, "worker"))
		}, func(t *testing.T, root string, q *Queue) {
			if _, err := q.Finish(J, Done, []byte("x"), FinishOptions{}); !errors.Is(err, ErrConflict) {
				t.Fatalf("finish: %v", err)
			}
			if _, err := q.Recover(J, true); !errors.Is(err, ErrConflict) {
				t.Fatalf("recover: %v", err)
			}
		}},
		{"done/J.result -> file", func(t *testing.T, root string, q *Queue, b bait) {
			claimJ(t, q)
			os.Symlink(b.file, qpath(root, "done", J+ResultSuffix))
		}, func(t *testing.T, root string, q *Queue) {
			if _, err := q.Finish(J, Done, []byte("x"), FinishOptions{}); !errors.Is(err, ErrConflict) {
				t.Fatalf("finish: %v", err)
			}
			mustState(t, q, J, StateClaimed)
		}},
		{"failed/J -> file", func(t *testing.T, root string, q *Queue, b bait) {
			claimJ(t, q)
			os.Symlink(b.file, qpath(root, "failed", J))
		}, func(t *testing.T, root string, q *Queue) {
			if _, err := q.Finish(J, Failed, []byte("x"), FinishOptions{}); !errors.Is(err, ErrConflict) {
				t.Fatalf("finish: %v", err)
			}
			// Refused before anything is written: no result beside the
			// planted name, the claim as it was.
			mustState(t, q, J, StateClaimed)
			if _, err := os.Lstat(qpath(root, "failed", J+ResultSuffix)); !os.IsNotExist(err) {
				t.Fatalf("failed/J.result: %v, want no such file", err)
			}
		}},
		{"queue/log -> file", func(t *testing.T, root string, q *Queue, b bait) {
			os.Remove(qpath(root, LogName))
			os.Symlink(b.file, qpath(root, LogName))
		}, func(t *testing.T, root string, q *Queue) {
			var logErr error
			q.OnLogError = func(err error) { logErr = err }
			claimJ(t, q)
			if !errors.Is(logErr, unix.ELOOP) {
				t.Fatalf("log error: %v", logErr)
			}
			mustState(t, q, J, StateClaimed)
		}},
		{"inbox/J -> file", func(t *testing.T, root string, q *Queue, b bait) {
			os.Symlink(b.file, qpath(root, "inbox", J))
		}, func(t *testing.T, root string, q *Queue) {
			p, s, err := q.Ingest()
			if err != nil || len(p) != 0 || len(s) != 1 {
				t.Fatalf("ingest: %v %v %v", p, s, err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, q := newQueue(t, "")
			b := newBait(t)
			before := b.snapshot(t)
			c.plant(t, root, q, b)
			c.attack(t, root, q)
			if _, err := q.Scan(); err != nil {
				t.Fatalf("scan: %v", err)
			}
			b.untouched(t, before)
		})
	}
}
