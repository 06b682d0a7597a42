package fsops

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// smallTmpfs mounts a tmpfs of size bytes in a scratch directory (root
// only) and returns it. The mount is made in a mount namespace of the
// test's own thread (locked to it for the rest of the test, and ended
// with it), so the host's mount table, which other tests compare, never
// changes.
func smallTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	runtime.LockOSThread() // never unlocked: the thread and its namespace end with the test
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make mounts private: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.Itoa(size)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fillUp writes a file in dir until the filesystem is full, then frees
// keep bytes of it again.
func fillUp(t *testing.T, dir string, keep int64) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	var size int64
	for {
		n, err := f.Write(buf)
		size += int64(n)
		if err != nil {
			break
		}
	}
	if err := f.Truncate(max(size-keep, 0)); err != nil {
		t.Fatal(err)
	}
	return p
}

// parseLines fails the test on any line of path that is not one JSON
// event, and returns the events.
func parseLines(t *testing.T, path string) []Event {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: a torn line: %v: %.60q", path, err, sc.Text())
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestAppendOnFullDiskNeverTears: the disk a log lives on is filled (as
// a hostile agent filling its workspace's filesystem would) to less than
// two lines; appends go on. Every append either wrote its whole line or
// reports an error and left nothing, so every line parses and no line is
// appended onto a partial one; once room is freed, appends work again.
func TestAppendOnFullDiskNeverTears(t *testing.T) {
	dir := smallTmpfs(t, 256<<10)
	log := filepath.Join(dir, "log")
	if err := AppendLine(log, Event{Type: "tool.call", Detail: "first"}.Line()); err != nil {
		t.Fatal(err)
	}
	filler := fillUp(t, dir, 6000)
	ok, failed := 0, 0
	for i := 0; i < 20; i++ {
		// Lines of ~3.5 KiB cross page boundaries: the write that
		// meets the full disk is a partial one.
		ev := Event{Type: "tool.call", PID: i + 1, Detail: strings.Repeat("d", 3500)}
		if err := AppendLine(log, ev.Line()); err != nil {
			failed++
			continue
		}
		ok++
	}
	if failed == 0 {
		t.Fatalf("no append met the full disk (%d whole)", ok)
	}
	if got := len(parseLines(t, log)); got != ok+1 {
		t.Fatalf("%d lines, want the first and %d whole appends", got, ok)
	}
	os.Remove(filler)
	if err := AppendLine(log, Event{Type: "tool.call", Detail: "after"}.Line()); err != nil {
		t.Fatalf("after room was freed: %v", err)
	}
	evs := parseLines(t, log)
	if len(evs) != ok+2 || evs[len(evs)-1].Detail != "after" {
		t.Fatalf("after room was freed: %d lines, the last %+v", len(evs), evs[len(evs)-1])
	}
}

// TestReserveAppendHoldsRoom: room reserved for a line is there when the
// line is appended, though the disk was filled in between; without room
// the reservation itself fails.
func TestReserveAppendHoldsRoom(t *testing.T) {
	dir := smallTmpfs(t, 256<<10)
	log := filepath.Join(dir, "log")
	if err := ReserveAppend(log, 2*4096); err != nil {
		t.Fatal(err)
	}
	filler := fillUp(t, dir, 0)
	for i := 0; i < 2; i++ {
		if err := AppendLine(log, Event{Type: "tool.call", Detail: strings.Repeat("r", 3500)}.Line()); err != nil {
			t.Fatalf("append %d into reserved room: %v", i, err)
		}
	}
	if err := ReserveAppend(log, 4096*4); err == nil {
		t.Fatal("a reservation on a full disk succeeded")
	}
	parseLines(t, log)
	os.Remove(filler)
}

// TestLogRotatesUnderConcurrentProcesses: four processes append to one
// log at once with a small rotation size. Every line of LOG and LOG.1
// parses, LOG stays near the size, and what is kept of each writer is
// the whole tail of its lines.
func TestLogRotatesUnderConcurrentProcesses(t *testing.T) {
	if path := os.Getenv("CTX_TEST_APPENDER"); path != "" {
		LogRotateBytes = 16 << 10
		w := os.Getenv("CTX_TEST_WRITER")
		for i := 0; i < 400; i++ {
			ev := Event{Type: "tool.call", Object: "w" + w, PID: i + 1, Detail: strings.Repeat("x", 100)}
			if err := AppendLogEvent(path, ev); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		os.Exit(0)
	}
	log := filepath.Join(t.TempDir(), "log")
	var cmds []*exec.Cmd
	for w := 0; w < 4; w++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLogRotatesUnderConcurrentProcesses$")
		cmd.Env = append(os.Environ(), "CTX_TEST_APPENDER="+log, "CTX_TEST_WRITER="+strconv.Itoa(w))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("appender: %v", err)
		}
	}
	// A line is dropped only with LOG.1 by a later rotation, so what is
	// kept of each writer is the end of its lines, without a hole; and
	// at least the last rotation size of lines is kept.
	seq := map[string][]int{}
	kept := 0
	for _, p := range []string{log + ".1", log} {
		for _, ev := range parseLines(t, p) {
			seq[ev.Object] = append(seq[ev.Object], ev.PID)
			kept++
		}
	}
	for w, pids := range seq {
		for i, pid := range pids {
			if pid != 400-len(pids)+1+i {
				t.Fatalf("writer %s: kept %v..., not a whole tail of its lines", w, pids[:min(len(pids), 8)])
			}
		}
	}
	if kept*200 < 16<<10 {
		t.Errorf("only %d lines kept", kept)
	}
	st, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 16<<10+4*4096 {
		t.Errorf("LOG is %d bytes, rotation at 16 KiB", st.Size())
	}
	if _, err := os.Stat(log + ".2"); err == nil {
		t.Error("a LOG.2 appeared")
	}
}

// TestRotationByAStaleAppender: an appender that opened the log before
// another rotated it (it waited for the lock) finds the path naming a new
// file and does not rotate again, which would put the fresh log over the
// full LOG.1 and lose it.
func TestRotationByAStaleAppender(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	LogRotateBytes = 4096
	defer func() { LogRotateBytes = 16 << 20 }()
	for i := 0; i < 600; i++ {
		if err := AppendLine(log, []byte(`{"n":`+strconv.Itoa(i)+"}\n")); err != nil {
			t.Fatal(err)
		}
	}
	fd, old, err := openAppend(log, 0) // the stale appender's view
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for i := 0; i < 2; i++ { // the first rotates, the second does not
		if err := AppendLog(log, []byte("{\"fresh\":1}\n")); err != nil {
			t.Fatal(err)
		}
	}
	full, _ := os.ReadFile(log + ".1")
	if err := rotateLog(log, old); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(log + ".1")
	if len(full) < 4096 || string(after) != string(full) {
		t.Fatalf("LOG.1 was %d bytes, after the stale rotation %d", len(full), len(after))
	}
}
