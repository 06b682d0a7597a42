package ptyterm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// checkRecord checks the invariants of every terminal record: seq counts
// 1, 2, 3... from first, every line is shorter than maxEventLine, and
// process.exit is the last event.
func checkRecord(t *testing.T, path string, first uint64) []Event {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.SplitAfter(raw, []byte("\n")) {
		if len(line) >= maxEventLine {
			t.Errorf("line %d is %d bytes", i+1, len(line))
		}
	}
	evs := readEvents(t, path)
	for i, ev := range evs {
		if ev.Seq != first+uint64(i) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, first+uint64(i))
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", ev.TS); err != nil {
			t.Errorf("event %d: ts %q: %v", i, ev.TS, err)
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != EventExit {
		t.Fatalf("record does not end with process.exit: %+v", evs)
	}
	return evs
}

func TestWatchersAndAttacher(t *testing.T) {
	s := serve(t, Config{}, "cat")
	w1 := dial(t, s.socket, "watch\n")
	w2 := dial(t, s.socket, "watch\n")
	waitEvent(t, s.events, EventWatch, nil)
	for len(eventsOfType(readEvents(t, s.events), EventWatch)) < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	a := dial(t, s.socket, "attach\nhello\n")
	// The PTY echoes the line, then cat writes it.
	for _, c := range []*rawClient{w1, w2, a} {
		c.out.waitFor(t, "hello\r\n", 2)
	}
	// Watchers' input is discarded.
	w1.send(t, "ignored\n")

	// A leaving attacher does not end the command.
	a.conn.Close()
	waitEvent(t, s.events, EventDetach, func(ev Event) bool { return ev.Mode == "attach" && ev.Reason == "eof" })
	if err := unix.Kill(s.pid, 0); err != nil {
		t.Fatalf("command gone after detach: %v", err)
	}
	a2 := dial(t, s.socket, "attach\n")
	waitEvent(t, s.events, EventAttach, nil)
	a2.out.waitFor(t, "hello\r\n", 2) // the scrollback
	a2.send(t, "again\n")
	w1.out.waitFor(t, "again\r\n", 2)
	a2.send(t, "\x04") // VEOF: cat reads EOF and exits
	if code := s.wait(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, c := range []*rawClient{w1, w2, a2} {
		c.closed(t)
	}
	if !bytes.Equal(w1.out.Bytes(), w2.out.Bytes()) {
		t.Fatalf("watchers differ:\n%q\n%q", w1.out.String(), w2.out.String())
	}
	if got := replayed(t, s.events); !bytes.Equal(got, w1.out.Bytes()) {
		t.Fatalf("replay %q, watcher saw %q", got, w1.out.String())
	}
	if strings.Contains(w1.out.String(), "ignored") {
		t.Fatal("watcher input reached the PTY")
	}
	evs := checkRecord(t, s.events, 1)
	if evs[0].Type != EventStart || evs[0].PID != s.pid || evs[0].Rows != 24 || evs[0].Cols != 80 {
		t.Errorf("first event %+v", evs[0])
	}
	if ex := evs[len(evs)-1]; *ex.ExitCode != 0 || ex.Signal != "" {
		t.Errorf("exit event %+v", ex)
	}
	if n := len(eventsOfType(evs, EventDetach)); n != 4 {
		t.Errorf("%d detach events, want 4 (one per client)", n)
	}
	for _, ev := range eventsOfType(evs, EventWatch) {
		if ev.UID == nil || *ev.UID != os.Getuid() || ev.PID != os.Getpid() {
			t.Errorf("watch event without our credentials: %+v", ev)
		}
	}
	if _, err := os.Lstat(s.socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestSecondAttachRefused(t *testing.T) {
	s := serve(t, Config{}, "cat")
	a := dial(t, s.socket, "attach\n")
	waitEvent(t, s.events, EventAttach, nil)

	out := newSyncBuffer()
	end, err := Connect(s.socket, Attach, strings.NewReader("intruder\n"), out, ClientOptions{})
	var re *RefusedError
	if !errors.As(err, &re) || re.Reason != "busy" || end != 0 {
		t.Fatalf("second attach: end %v, err %v", end, err)
	}
	if out.String() != "" {
		t.Fatalf("refused client got output %q", out.String())
	}
	waitEvent(t, s.events, EventRefused, func(ev Event) bool { return ev.Reason == "busy" })

	// The first attacher is untouched and still drives the command.
	a.send(t, "mine\n")
	a.out.waitFor(t, "mine\r\n", 2)
	a.send(t, "\x04")
	if code := s.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(string(replayed(t, s.events)), "intruder") {
		t.Fatal("refused attacher's input reached the PTY")
	}
}

func TestLateWatcherGetsScrollback(t *testing.T) {
	// READY, then (on a line of input) 200,000 "x" and END, then wait
	// for another line. The output starts only once the early watcher
	// has seen READY, so it is there from the start, however fast the
	// relay.
	s := serve(t, Config{}, "sh", "-c", `echo READY; read go; head -c 200000 /dev/zero | tr '\0' x; echo; echo END; read x; echo "got $x"`)
	early := dial(t, s.socket, "watch\n")
	early.out.waitFor(t, "READY\r\n", 1)
	a := dial(t, s.socket, "attach\ngo\n")
	early.out.waitFor(t, "END\r\n", 1)
	full := early.out.Bytes()

	late := dial(t, s.socket, "watch\n")
	deadline := time.Now().Add(testTimeout)
	for len(late.out.Bytes()) < ScrollbackSize && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // nothing more may arrive
	got := late.out.Bytes()
	if len(full) < ScrollbackSize+1000 {
		t.Fatalf("early watcher saw only %d bytes", len(full))
	}
	if !bytes.Equal(got, full[len(full)-ScrollbackSize:]) {
		t.Fatalf("late watcher got %d bytes, not the last %d of the output", len(got), ScrollbackSize)
	}
	a.send(t, "there\n")
	late.out.waitFor(t, "got there", 1)
	if code := s.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// The early watcher has all of it once the terminal closed its
	// connection.
	select {
	case <-early.done:
	case <-time.After(testTimeout):
		t.Fatal("the early watcher's connection stayed open after the end")
	}
	if !bytes.HasSuffix(late.out.Bytes(), []byte("got there\r\n")) {
		t.Fatalf("late watcher ends with %q", tail(late.out.String()))
	}
	if rep := replayed(t, s.events); !bytes.Equal(rep, early.out.Bytes()) {
		t.Fatalf("replay differs from what the early watcher saw (%d vs %d bytes)", len(rep), len(early.out.Bytes()))
	}
}

func TestResizeInBand(t *testing.T) {
	s := serve(t, Config{Size: Winsize{Rows: 20, Cols: 70}}, "sh")
	a := dial(t, s.socket, "attach\n")
	seq := string(WinsizeSequence(Winsize{33, 101}))
	// The sequence split inside the marker and inside the body.
	a.send(t, seq[:3])
	time.Sleep(5 * time.Millisecond)
	a.send(t, seq[3:14])
	time.Sleep(5 * time.Millisecond)
	a.send(t, seq[14:]+"stty size\n")
	a.out.waitFor(t, "33 101\r\n", 1)
	rs := waitEvent(t, s.events, EventResize, nil)
	if rs.Rows != 33 || rs.Cols != 101 {
		t.Fatalf("resize event %+v", rs)
	}
	a.send(t, "exit\n")
	s.wait()
	if strings.Contains(string(replayed(t, s.events)), "ctxterm") {
		t.Fatal("in-band sequence reached the program")
	}
}

func TestInBandFilterOnLiveStream(t *testing.T) {
	// In raw mode the program sees every byte as it comes: a lone ESC
	// (released after escapeWait), ordinary bytes, and none of ctxterm's
	// sequences, well-formed or not.
	s := serve(t, Config{}, "sh", "-c", `stty raw -echo; head -c 5 | od -An -c; echo DONE`)
	a := dial(t, s.socket, "attach\n")
	time.Sleep(100 * time.Millisecond) // let stty run before input arrives
	a.send(t, "\x1b")
	time.Sleep(4 * escapeWait)
	a.send(t, "a\x1b]ctxterm;bogus\ab")
	a.send(t, string(WinsizeSequence(Winsize{30, 90}))+"c\x1b]ctxterm;winsize;0;0\x1b\\d")
	a.out.waitFor(t, "DONE", 1)
	s.wait()
	out := a.out.String()
	if !strings.Contains(out, `033   a   b   c   d`) {
		t.Fatalf("program read %q", out)
	}
	if rs := eventsOfType(readEvents(t, s.events), EventResize); len(rs) != 1 || rs[0].Rows != 30 || rs[0].Cols != 90 {
		t.Fatalf("resize events %+v", rs)
	}
}

func TestReplayIsExactlyWhatTheProgramWrote(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(data)
	file := filepath.Join(dir, "data")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// -opost: the terminal passes output through untranslated.
	s := serve(t, Config{}, "sh", "-c", `stty raw -echo -opost && cat "$0"`, file)
	if code := s.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := replayed(t, s.events)
	if !bytes.Equal(got, data) {
		t.Fatalf("replay: %d bytes, want %d identical bytes", len(got), len(data))
	}
	evs := checkRecord(t, s.events, 1)
	if n := len(eventsOfType(evs, EventOutput)); n < len(data)/maxOutputData {
		t.Fatalf("only %d output events for %d bytes", n, len(data))
	}
	code, found, err := ReadExit(s.events)
	if err != nil || !found || code != 0 {
		t.Fatalf("ReadExit: %d %v %v", code, found, err)
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
		signal string
	}{
		{"exit 7", 7, ""},
		{"kill -TERM $$", 143, "SIGTERM"},
		{"kill -KILL $$", 137, "SIGKILL"},
	} {
		s := serve(t, Config{}, "sh", "-c", tc.script)
		if code := s.wait(); code != tc.code {
			t.Errorf("%s: exit %d, want %d", tc.script, code, tc.code)
		}
		ex := checkRecord(t, s.events, 1)
		last := ex[len(ex)-1]
		if *last.ExitCode != tc.code || last.Signal != tc.signal {
			t.Errorf("%s: recorded %+v", tc.script, last)
		}
		if code, found, err := ReadExit(s.events); err != nil || !found || code != tc.code {
			t.Errorf("%s: ReadExit %d %v %v", tc.script, code, found, err)
		}
	}
}

func TestSignalsForwarded(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	s := serve(t, Config{Signals: sigs}, "sleep", "100")
	sigs <- syscall.SIGTERM
	if code := s.wait(); code != 143 {
		t.Fatalf("exit %d, want 143", code)
	}
}

func TestSlowWatcherDropped(t *testing.T) {
	// 8 MiB in 64 KiB steps: paced, so the reading client keeps up even
	// under the race detector, while the one that never reads falls more
	// than maxClientQueue behind.
	const total = 128 << 16
	if total < 2*maxClientQueue {
		t.Fatal("the output must exceed a client's queue")
	}
	s := serve(t, Config{}, "sh", "-c", `read go; stty raw -echo
		i=0; while [ $i -lt 128 ]; do head -c 65536 /dev/zero; sleep 0.005; i=$((i+1)); done`)
	// The slow client never reads.
	slow, err := fsops.DialUnix(s.socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := slow.Write([]byte("watch\n")); err != nil {
		t.Fatal(err)
	}
	fast := dial(t, s.socket, "watch\n")
	a := dial(t, s.socket, "attach\n")
	for len(eventsOfType(readEvents(t, s.events), EventWatch)) < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	a.send(t, "go\n")
	if code := s.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	fast.closed(t)
	n := bytes.Count(fast.out.Bytes(), []byte{0})
	if n != total {
		t.Fatalf("fast watcher got %d NUL bytes, want %d", n, total)
	}
	var dropped bool
	for _, ev := range eventsOfType(readEvents(t, s.events), EventDetach) {
		if ev.Reason == "overflow" {
			dropped = true
		}
	}
	if !dropped {
		t.Fatal("the client that never read was not dropped")
	}
	// The dropped connection was closed by ctxterm: reading it ends.
	slow.SetReadDeadline(time.Now().Add(testTimeout))
	if _, err := io.Copy(io.Discard, slow); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("dropped client: %v", err)
	}
}

func TestClientLimitAndShutdown(t *testing.T) {
	// The client limit holds, and when the command exits Serve returns
	// with every client closed (none blocks the shutdown).
	s := serve(t, Config{}, "sh", "-c", `read x`)
	var cs []*rawClient
	for i := 0; i < MaxClients-1; i++ {
		cs = append(cs, dial(t, s.socket, "watch\n"))
	}
	a := dial(t, s.socket, "attach\n")
	for len(eventsOfType(readEvents(t, s.events), EventAttach)) < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	for len(eventsOfType(readEvents(t, s.events), EventWatch)) < MaxClients-1 {
		time.Sleep(10 * time.Millisecond)
	}
	over := dial(t, s.socket, "watch\n")
	over.closed(t)
	if !strings.HasPrefix(over.out.String(), "ctxterm: limit: ") {
		t.Fatalf("client beyond the limit got %q", over.out.String())
	}
	a.send(t, "x\n")
	s.wait()
	for _, c := range append(cs, a) {
		c.closed(t)
	}
}

func TestModeLineRefusals(t *testing.T) {
	old := modeLineTimeout
	modeLineTimeout = 200 * time.Millisecond
	defer func() { modeLineTimeout = old }()
	s := serve(t, Config{}, "cat")
	for _, tc := range []struct{ hello, want string }{
		{"hello\n", "ctxterm: mode: "},
		{"WATCH\n", "ctxterm: mode: "},
		{"watch \n", "ctxterm: mode: "},
		{"attach\r\n", "ctxterm: mode: "},
		{"watc", "ctxterm: timeout: "},
		{"", "ctxterm: timeout: "},
	} {
		c := dial(t, s.socket, tc.hello)
		c.closed(t)
		if got := c.out.String(); !strings.HasPrefix(got, tc.want) || strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") {
			t.Errorf("%q: got %q", tc.hello, got)
		}
	}
	// The command is untouched.
	a := dial(t, s.socket, "attach\nok\n")
	a.out.waitFor(t, "ok\r\n", 2)
	a.send(t, "\x04")
	s.wait()
	if n := len(eventsOfType(readEvents(t, s.events), EventRefused)); n != 6 {
		t.Fatalf("%d refused events, want 6", n)
	}
}

func TestSeqContinuesAcrossRuns(t *testing.T) {
	events := filepath.Join(t.TempDir(), "events.jsonl")
	s1 := serve(t, Config{Events: events}, "echo", "one")
	s1.wait()
	n := uint64(len(checkRecord(t, events, 1)))
	s2 := serve(t, Config{Events: events}, "echo", "two")
	s2.wait()
	evs := checkRecord(t, events, 1)
	if evs[n].Seq != n+1 || evs[n].Type != EventStart {
		t.Fatalf("second run starts with %+v", evs[n])
	}
	if got := string(replayed(t, events)); got != "one\r\ntwo\r\n" {
		t.Fatalf("replay %q", got)
	}
}

func TestPipeConsole(t *testing.T) {
	t.Run("reader without newline", func(t *testing.T) {
		out := newSyncBuffer()
		s := serve(t, Config{Console: ConsolePipe, ConsoleIn: strings.NewReader("abc"), ConsoleOut: out}, "cat")
		if code := s.wait(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		// "abc" echoed by the terminal, then written by cat.
		if got := out.String(); strings.Count(got, "abc") != 2 {
			t.Fatalf("console got %q", got)
		}
		if !bytes.Equal(out.Bytes(), replayed(t, s.events)) {
			t.Fatal("console output differs from the record")
		}
	})
	t.Run("pipe holds the attach slot until EOF", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		out := newSyncBuffer()
		s := serve(t, Config{Console: ConsolePipe, ConsoleIn: r, ConsoleOut: out},
			"sh", "-c", `cat >/dev/null; read x; echo "got-$x"; exit 3`)
		w.Write([]byte("first\n"))
		busy := dial(t, s.socket, "attach\n")
		busy.closed(t)
		if !strings.HasPrefix(busy.out.String(), "ctxterm: busy: ") {
			t.Fatalf("attach during pipe input: %q", busy.out.String())
		}
		w.Close() // EOF: cat ends, the slot is free
		var a *rawClient
		deadline := time.Now().Add(testTimeout)
		for {
			a = dial(t, s.socket, "attach\n")
			time.Sleep(50 * time.Millisecond)
			if !strings.HasPrefix(a.out.String(), "ctxterm: busy") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("attach slot never freed")
			}
		}
		a.send(t, "zz\n")
		if code := s.wait(); code != 3 {
			t.Fatalf("exit %d", code)
		}
		if !strings.Contains(out.String(), "got-zz") {
			t.Fatalf("console got %q", out.String())
		}
	})
}

func TestBackgroundHolderCutOff(t *testing.T) {
	// A background process that ignores SIGHUP keeps the terminal open
	// after the command exits: ctxterm stops reading after drainAfterExit
	// instead of waiting for it.
	s := serve(t, Config{}, "sh", "-c", `(trap "" HUP; exec sleep 60) & sleep 0.3; echo "bg=$!"`)
	start := time.Now()
	code := s.wait()
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if d := time.Since(start); d > drainAfterExit+5*time.Second {
		t.Fatalf("Serve took %v after the command exited", d)
	}
	out := string(replayed(t, s.events))
	var pid int
	if i := strings.Index(out, "bg="); i >= 0 {
		fmt.Sscanf(out[i+3:], "%d", &pid)
	}
	if pid <= 0 {
		t.Fatalf("no background pid in %q", out)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the background process is gone already (%v): the test proves nothing", err)
	}
	checkRecord(t, s.events, 1)
}
