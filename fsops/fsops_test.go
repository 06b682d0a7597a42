package fsops

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	os.WriteFile(f, []byte("hello"), 0o644)
	os.Symlink(f, filepath.Join(dir, "link"))
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)

	if b, err := ReadRegular(f, 5); err != nil || string(b) != "hello" {
		t.Errorf("ReadRegular(f, 5) = %q, %v", b, err)
	}
	for name, want := range map[string]syscall.Errno{"link": syscall.ELOOP, "d": syscall.EISDIR, "fifo": syscall.EINVAL, "missing": syscall.ENOENT} {
		_, err := ReadRegular(filepath.Join(dir, name), 100)
		if !errors.Is(err, want) {
			t.Errorf("ReadRegular(%s) = %v, want %v", name, err, want)
		}
	}
	if _, err := ReadRegular(f, 4); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("ReadRegular over the limit = %v, want EFBIG", err)
	}
}

// TestReadRegularSizes reads files at and around the limit, an empty one,
// and a file whose size stat reports as 0 though it has content (a /proc
// file): the size is only where the buffer starts.
func TestReadRegularSizes(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 100000) // 1.6 MB
	for _, c := range []struct {
		size  int
		limit int64
		ok    bool
	}{{0, 0, true}, {0, 10, true}, {1, 0, false}, {10, 10, true}, {11, 10, false}, {len(big), int64(len(big)), true},
		{len(big), int64(len(big)) - 1, false}, {len(big), 1 << 30, true}, {100, 1 << 20, true}} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, big[:c.size], 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := ReadRegular(p, c.limit)
		if c.ok && (err != nil || !bytes.Equal(b, big[:c.size])) {
			t.Errorf("size %d, limit %d: %d bytes, %v", c.size, c.limit, len(b), err)
		}
		if !c.ok && (!errors.Is(err, syscall.EFBIG) || b != nil) {
			t.Errorf("size %d, limit %d: %d bytes, %v; want EFBIG", c.size, c.limit, len(b), err)
		}
	}
	want, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	got, err := ReadRegular("/proc/self/mountinfo", 1<<20)
	if err != nil || len(got) == 0 || !bytes.Equal(got[:bytes.IndexByte(got, '\n')], want[:bytes.IndexByte(want, '\n')]) {
		t.Errorf("/proc/self/mountinfo: %q, %v", got, err)
	}
	if _, err := ReadRegular("/proc/self/mountinfo", 3); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("/proc/self/mountinfo over 3 bytes: %v, want EFBIG", err)
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteAtomic(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(p, []byte("two"), 0o640); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "two" || st.Mode().Perm() != 0o640 {
		t.Errorf("after WriteAtomic: %q %v", b, st.Mode())
	}
	assertNoTemps(t, dir)
}

// TestWriteAtomicRefusesSymlink checks a symlink at the target is neither
// written through nor replaced, and no temporary is left.
func TestWriteAtomicRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("precious"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if err := WriteAtomic(link, []byte("evil"), 0o644); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("WriteAtomic through symlink = %v, want ELOOP", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious" {
		t.Errorf("target changed: %q", b)
	}
	if l, err := os.Readlink(link); err != nil || l != target {
		t.Errorf("link changed: %q %v", l, err)
	}
	assertNoTemps(t, dir)
}

func TestWriteAtomicFailureLeavesTargetAndNoTemp(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root ignores directory write permission; use a missing directory
		// to make the temp creation fail instead.
		dir := t.TempDir()
		if err := WriteAtomic(filepath.Join(dir, "nope", "f"), []byte("x"), 0o644); err == nil {
			t.Fatal("write into a missing directory succeeded")
		}
		return
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("old"), 0o644)
	os.Chmod(dir, 0o555)
	defer os.Chmod(dir, 0o755)
	if err := WriteAtomic(p, []byte("new"), 0o644); err == nil {
		t.Fatal("write into a read-only directory succeeded")
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("target changed: %q", b)
	}
}

func TestWriteNewNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteNew(p, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteNew(p, []byte("second"), 0o644); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second WriteNew = %v, want EEXIST", err)
	}
	os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(dir, "dangling"))
	if err := WriteNew(filepath.Join(dir, "dangling"), []byte("x"), 0o644); !errors.Is(err, os.ErrExist) {
		t.Fatalf("WriteNew over a dangling symlink = %v, want EEXIST", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "elsewhere")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("WriteNew created the symlink's target")
	}
	if b, _ := os.ReadFile(p); string(b) != "first" {
		t.Errorf("file replaced: %q", b)
	}
	assertNoTemps(t, dir)
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

// TestAppendEventConcurrent has many writers append at once and checks every
// line is whole and every event is present exactly once.
func TestAppendEventConcurrent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	const writers, each = 16, 200
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				ev := Event{Type: "tool.call", Agent: "a", Session: "s", Object: "tool/x", Status: "ok",
					PID: w*each + i, Detail: strings.Repeat("d", 3000)}
				if err := AppendLine(p, ev.Line()); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	f, _ := os.Open(p)
	defer f.Close()
	seen := map[int]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("torn line: %v: %.80q", err, sc.Text())
		}
		if seen[ev.PID] {
			t.Fatalf("event %d twice", ev.PID)
		}
		seen[ev.PID] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("%d events, want %d", len(seen), writers*each)
	}
}

func TestEventLineBounded(t *testing.T) {
	ev := Event{Type: "tool.call", Detail: strings.Repeat("é", 10000)}
	line := ev.Line()
	if len(line) > maxEventLine || !bytes.HasSuffix(line, []byte("\n")) {
		t.Fatalf("line of %d bytes", len(line))
	}
	var back Event
	if err := json.Unmarshal(line, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"ts":`, `"type":`, `"agent":`, `"session":`, `"object":`, `"status":`} {
		if !bytes.Contains(line, []byte(k)) {
			t.Errorf("minimum field %s missing from %s", k, line)
		}
	}
}

func TestAppendEventRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep\n"), 0o644)
	os.Symlink(target, filepath.Join(dir, "log"))
	if err := AppendLine(filepath.Join(dir, "log"), Event{Type: "x"}.Line()); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("append through symlink = %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("target changed: %q", b)
	}
}

func TestNewRunID(t *testing.T) {
	id := NewRunID()
	if len(id) != 36 || !strings.HasPrefix(id, "ctx-") || strings.Trim(id[4:], "0123456789abcdef") != "" {
		t.Fatalf("run id %q", id)
	}
	if NewRunID() == id {
		t.Fatal("run ids repeat")
	}
}

func TestResolveABIPath(t *testing.T) {
	root := Root{Dir: t.TempDir()}
	os.MkdirAll(root.Path("tool", "fs.read.d"), 0o755)
	os.Symlink("/etc", root.Path("evil"))
	cases := map[string]string{
		"":                       root.Dir,
		"/ctx":                   root.Dir,
		"/ctx/tool":              root.Path("tool"),
		"tool/fs.read.d":         root.Path("tool", "fs.read.d"),
		root.Path("tool"):        root.Path("tool"),
		"tool/new.d/x":           root.Path("tool", "new.d", "x"),
		"/ctx/tool/./fs.read.d/": root.Path("tool", "fs.read.d"),
	}
	for in, want := range cases {
		got, err := root.ResolveABIPath(in)
		if err != nil || got != want {
			t.Errorf("ResolveABIPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"../x", "tool/../../etc", "evil/passwd", "/etc/passwd", "/ctx/evil"} {
		if got, err := root.ResolveABIPath(in); err == nil {
			t.Errorf("ResolveABIPath(%q) = %q, want an error", in, got)
		}
	}
}

func FuzzResolveABIPath(f *testing.F) {
	root := Root{Dir: "/nonexistent-ctx-root"}
	for _, s := range []string{"tool", "/ctx/tool/x", "../a", "a/../../b", "/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := root.ResolveABIPath(p)
		if err != nil {
			return
		}
		if got != root.Dir && !strings.HasPrefix(got, root.Dir+"/") {
			t.Fatalf("ResolveABIPath(%q) = %q escapes the root", p, got)
		}
	})
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/x\134y`: `/x\y`, `/bad\9`: `/bad\9`} {
		if got := UnescapeMountinfo(in); got != want {
			t.Errorf("UnescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEventLineAnyLongField: any field may be long (a 5 KB status made the old
// line builder loop forever); the line still ends, fits one append and
// stays valid JSON.
func TestEventLineAnyLongField(t *testing.T) {
	long := strings.Repeat("\x01é", 3000)
	for _, ev := range []Event{
		{Type: "tool.call", Status: strings.Repeat("x", 5000)},
		{Type: long, Agent: long, Session: long, Object: long, Status: long, Run: long, Errno: long, Layer: long, Worker: long, Detail: long},
		{Type: "tool.call", Detail: long},
	} {
		done := make(chan []byte, 1)
		go func() { done <- ev.Line() }()
		select {
		case line := <-done:
			if len(line) > maxEventLine {
				t.Errorf("line of %d bytes", len(line))
			}
			var back map[string]any
			if err := json.Unmarshal(line, &back); err != nil {
				t.Errorf("not JSON: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Event.Line did not return")
		}
	}
}
