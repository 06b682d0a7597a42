package ptyterm

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRecordLimit streams 2 MB through a terminal whose record is held to
// 64 KiB: the record stops with one record.stopped line, the callback runs
// once, and the command, the watcher and the console get every byte.
func TestRecordLimit(t *testing.T) {
	const limit, size = 64 << 10, 2_000_000
	var calls atomic.Int32
	gateR, gateW := io.Pipe()
	defer gateW.Close()
	console := newSyncBuffer()
	s := serve(t, Config{
		Console: ConsolePipe, ConsoleIn: gateR, ConsoleOut: console,
		RecordLimit: limit, OnRecordLimit: func() { calls.Add(1) },
		Cmd: exec.Command("sh", "-c", `stty -echo; read go; head -c `+strconv.Itoa(size)+` /dev/zero | tr '\0' a; echo done; read again; echo bye`),
	})
	w := dial(t, s.socket, "watch\n")
	waitEvent(t, s.events, EventWatch, nil)
	gateW.Write([]byte("go\n"))
	console.waitFor(t, "done", 1)
	w.out.waitFor(t, "done", 1)
	waitEvent(t, s.events, EventStopped, nil)
	// (the callback runs right after the line is written)
	for deadline := time.Now().Add(testTimeout); calls.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnRecordLimit called %d times before the exit", n)
	}
	// A client joining after the stop is served, and not recorded.
	w2 := dial(t, s.socket, "watch\n")
	w2.out.waitFor(t, "done", 1) // the scrollback
	gateW.Write([]byte("again\n"))
	if code := s.wait(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	w.closed(t)
	for _, out := range []string{console.String(), w.out.String()} {
		if n := strings.Count(out, "a"); n != size || !strings.Contains(out, "done\r\nbye\r\n") {
			t.Fatalf("a client got %d bytes of output and %q", n, tail(out))
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnRecordLimit called %d times", n)
	}

	raw, err := os.ReadFile(s.events)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	last := lines[len(lines)-1]
	if len(raw)-len(last) > limit {
		t.Fatalf("record holds %d bytes before its last line, limit %d", len(raw)-len(last), limit)
	}
	var stop Event
	if err := json.Unmarshal(last, &stop); err != nil || stop.Type != EventStopped ||
		stop.Reason != StopReasonLimit || stop.Limit != limit {
		t.Fatalf("last line %q (%v)", last, err)
	}
	evs := readEvents(t, s.events)
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	if n := len(eventsOfType(evs, EventStopped)); n != 1 {
		t.Fatalf("%d record.stopped events", n)
	}
	if n := len(eventsOfType(evs, EventWatch)); n != 1 {
		t.Fatalf("%d terminal.watch events, want the one before the stop", n)
	}
	// What was recorded is the start of the output, cut at a line (after
	// the echo of "go" when it came before stty -echo).
	rec := replayed(t, s.events)
	if len(rec) < limit/2 || strings.Trim(strings.TrimPrefix(string(rec), "go\r\n"), "a") != "" {
		t.Fatalf("replay holds %d bytes: %q", len(rec), tail(string(rec)))
	}
	t.Logf("record %d bytes for a limit of %d, %d of 2 MB of output replayable", len(raw), limit, len(rec))
}

// TestRecordLimitEvents: any event counts towards the limit; the one that
// would pass it stops the record; a record's earlier runs do not count.
func TestRecordLimitEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	earlier := `{"seq":1,"ts":"2026-01-01T00:00:00.000Z","type":"pty.resize","rows":1,"cols":1}` + "\n"
	if err := os.WriteFile(path, []byte(strings.Repeat(earlier, 20)), 0o644); err != nil {
		t.Fatal(err)
	}
	before := int64(20 * len(earlier))
	calls := 0
	rec, err := openRecorder(path, 300, func() { calls++ }, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		rec.Event(Event{Type: EventResize, Rows: uint16(i + 1), Cols: 80})
	}
	rec.Output([]byte("late output"))
	rec.FlushOutput()
	rec.Event(Event{Type: EventExit, ExitCode: new(int)})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("OnRecordLimit called %d times", calls)
	}
	evs := readEvents(t, path)[20:]
	resizes := eventsOfType(evs, EventResize)
	if len(resizes) < 2 || len(evs) != len(resizes)+1 || evs[len(evs)-1].Type != EventStopped {
		t.Fatalf("this run recorded %+v", evs)
	}
	st, _ := os.Stat(path)
	b, _ := json.Marshal(evs[len(evs)-1])
	lastLine := int64(len(b)) + 1
	if got := st.Size() - before - lastLine; got > 300 || got < 300-100 {
		t.Fatalf("this run wrote %d bytes before record.stopped, limit 300", got)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+2) { // continues after the earlier run's seq 1
			t.Fatalf("seq %d at %d", ev.Seq, i)
		}
	}
}

// TestRecordUnlimited: without a limit nothing stops the record.
func TestRecordUnlimited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	rec, err := openRecorder(path, 0, func() { t.Error("OnRecordLimit called") }, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("x"), 1<<20)
	rec.Output(data)
	rec.FlushOutput()
	rec.Event(Event{Type: EventExit, ExitCode: new(int)})
	rec.Close()
	if got := replayed(t, path); !bytes.Equal(got, data) {
		t.Fatalf("replay %d bytes", len(got))
	}
	if evs := readEvents(t, path); evs[len(evs)-1].Type != EventExit {
		t.Fatal("no process.exit")
	}
}

// TestRecordCompleteUnderFlood: a program that writes 16 MiB as fast as
// the terminal takes it, with a watcher joined, is recorded byte for byte
// (the record batches its writes and keeps the output where it was read,
// see slab, and must lose nothing), and the watcher receives the same
// bytes. Slabs are recycled within and between the runs and poisoned
// when let go of, so this also checks that nothing reads a slab after
// letting go of it.
func TestRecordCompleteUnderFlood(t *testing.T) {
	poisonSlabs = true // a part used after its slab was let go of reads garbage
	defer func() { poisonSlabs = false }()
	dir := t.TempDir()
	data := make([]byte, 16<<20)
	rand.New(rand.NewSource(2)).Read(data)
	file := filepath.Join(dir, "data")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ {
		// -opost: the terminal passes output through untranslated.
		// The program says R once its terminal is raw, then waits for go.
		s := serve(t, Config{}, "sh", "-c", `stty raw -echo -opost && printf R && read go && cat "$0"`, file)
		w := dial(t, s.socket, "watch\n")
		a := dial(t, s.socket, "attach\n")
		w.out.waitFor(t, "R", 1)
		a.send(t, "go\n")
		if code := s.wait(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		want := append([]byte("R"), data...)
		got := replayed(t, s.events)
		if !bytes.Equal(got, want) {
			t.Fatalf("run %d: replay has %d bytes, want %d identical bytes (first difference at %d)", run, len(got), len(want), firstDiff(got, want))
		}
		checkRecord(t, s.events, 1)
		w.closed(t)
		dropped := false
		for _, ev := range eventsOfType(readEvents(t, s.events), EventDetach) {
			dropped = dropped || ev.Reason == "overflow"
		}
		if out := w.out.Bytes(); !dropped && !bytes.Equal(out, want) {
			t.Fatalf("run %d: watcher got %d bytes, want %d identical bytes (first difference at %d)", run, len(out), len(want), firstDiff(out, want))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
