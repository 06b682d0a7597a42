package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentIngestReportsOnce: two ingests race over the same inbox
// file, round after round. Exactly one may report it published; the
// other says nothing of it (an ingest that found it gone, or lost the
// move, used to report it as ingested too).
func TestConcurrentIngestReportsOnce(t *testing.T) {
	root, q := newQueue(t, fastDir(t))
	q2, err := Open(root, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	for i := 0; i < 300; i++ {
		j := fmt.Sprintf("in-%04d.req.json", i)
		if err := os.WriteFile(qpath(root, "inbox", j), requestBytes(j), 0o640); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		reports := make([]int, 2)
		for k, qq := range []*Queue{q, q2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pub, skipped, err := qq.Ingest()
				if err != nil || len(skipped) > 0 {
					t.Errorf("ingest: %v, skipped %v", err, skipped)
				}
				reports[k] = len(pub)
			}()
		}
		wg.Wait()
		if reports[0]+reports[1] != 1 {
			t.Fatalf("round %d: %s reported %d and %d times", i, j, reports[0], reports[1])
		}
		mustFile(t, qpath(root, "pending", j), requestBytes(j))
	}
}

// TestUnsafeCacheOptions: a remote mount is safe only with the options
// that make lookups coherent across hosts; the warning names them.
func TestUnsafeCacheOptions(t *testing.T) {
	for _, c := range []struct {
		typ, opts string
		safe      bool
		fix       string
	}{
		{"nfs4", "rw,relatime,vers=4.2", false, "lookupcache=none"},
		{"nfs4", "rw,vers=4.2,lookupcache=none", true, ""},
		{"nfs", "rw,actimeo=0", true, ""},
		{"ceph", "rw,name=admin", true, ""},
		{"fuse.sshfs", "rw,user_id=0,sshfs:reconnect", false, "dir_cache=no"},
		{"fuse.sshfs", "rw,sshfs:dir_cache=no,entry_timeout=0,attr_timeout=0", true, ""},
		{"fuse.sshfs", "rw,sshfs:dir_cache=no,entry_timeout=0.5,attr_timeout=0", false, "entry_timeout=0"},
		{"cifs", "rw,actimeo=1", false, "actimeo=0,cache=none"},
		{"fuse.rclone", "rw", false, "entry_timeout=0"},
	} {
		why := unsafeCache(FSInfo{Type: c.typ, Remote: true, Options: c.opts})
		if (why == "") != c.safe || !strings.Contains(why, c.fix) {
			t.Errorf("%s %q: %q; want safe=%v naming %q", c.typ, c.opts, why, c.safe, c.fix)
		}
	}
}

// TestNetFSNoHardLinks: sshfs with hard links disabled has neither
// RENAME_NOREPLACE nor link(2). Publish, and the check shared new runs,
// refuse with a message naming the filesystem and what it lacks, and
// nothing is left behind; no request is ever placed by a plain rename.
func TestNetFSNoHardLinks(t *testing.T) {
	n := startNetFS(t)
	m := n.mount(t, safeSSHFS+",disable_hardlink")
	root := filepath.Join(m, "ctx")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateSpace(root, "proj"); err != nil {
		t.Fatal(err)
	}
	q, err := Open(root, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	err = q.CheckPrimitives()
	if !errors.Is(err, ErrNoPrimitive) || !strings.Contains(err.Error(), "fuse.sshfs") || !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("CheckPrimitives: %v", err)
	}
	_, err = q.Publish("x.req.json", requestBytes("x.req.json"))
	if !errors.Is(err, ErrNoPrimitive) || !strings.Contains(err.Error(), "fuse.sshfs") {
		t.Fatalf("publish without hard links: %v", err)
	}
	if ents, _ := os.ReadDir(qpath(root, "pending")); len(ents) != 0 {
		t.Fatalf("pending/ after a refused publish: %v", ents)
	}
}

// TestNetFSUnsafeMountWarns: sshfs with its default caches is detected
// as such (the sshfs process's options are read), and the warning names
// the filesystem and the options that make it safe.
func TestNetFSUnsafeMountWarns(t *testing.T) {
	n := startNetFS(t)
	root := filepath.Join(n.mount(t, ""), "ctx")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateSpace(root, "proj"); err != nil {
		t.Fatal(err)
	}
	q, err := Open(root, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	w := q.FSWarning()
	if !strings.Contains(w, "fuse.sshfs") || !strings.Contains(w, "dir_cache=no,entry_timeout=0,attr_timeout=0") {
		t.Fatalf("warning on a caching sshfs mount: %q", w)
	}
	if err := q.CheckPrimitives(); err != nil {
		t.Fatalf("sshfs has hard links: %v", err)
	}
}
