package ptyterm

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ctx/fsops"
)

// testTimeout bounds every wait in these tests; nothing here should take
// more than a fraction of it.
const testTimeout = 20 * time.Second

// served is a Serve running in the background.
type served struct {
	t      *testing.T
	cfg    Config
	pid    int
	done   chan struct{}
	code   int
	err    error
	socket string
	events string
}

// serve starts Serve with cfg (Socket and Events defaulting to fresh paths
// in a temporary directory) and waits until the command runs.
func serve(t *testing.T, cfg Config, argv ...string) *served {
	t.Helper()
	dir := t.TempDir()
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(dir, "run", "main.sock")
	}
	if cfg.Events == "" {
		cfg.Events = filepath.Join(dir, "events.jsonl")
	}
	if cfg.Cmd == nil {
		cfg.Cmd = exec.Command(argv[0], argv[1:]...)
	}
	if cfg.Owner == 0 {
		cfg.Owner = os.Getuid()
	}
	s := &served{t: t, done: make(chan struct{}), socket: cfg.Socket, events: cfg.Events}
	started := make(chan int, 1)
	cfg.Started = func(pid int) { started <- pid }
	s.cfg = cfg
	go func() {
		defer close(s.done)
		s.code, s.err = Serve(cfg)
	}()
	select {
	case s.pid = <-started:
	case <-s.done:
		t.Fatalf("Serve returned before starting: %d %v", s.code, s.err)
	case <-time.After(testTimeout):
		t.Fatal("Serve did not start")
	}
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			if s.cfg.Cmd.Process != nil {
				s.cfg.Cmd.Process.Kill()
			}
			<-s.done
		}
	})
	return s
}

// wait returns Serve's exit code once the command has exited.
func (s *served) wait() int {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(testTimeout):
		s.t.Fatal("Serve did not return")
	}
	if s.err != nil {
		s.t.Fatalf("Serve: %v", s.err)
	}
	return s.code
}

// syncBuffer collects bytes from a goroutine and lets a test wait for them.
type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{more: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	select {
	case b.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

func (b *syncBuffer) String() string { return string(b.Bytes()) }

// waitFor waits until the buffer holds want, n times.
func (b *syncBuffer) waitFor(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.After(testTimeout)
	for strings.Count(b.String(), want) < n {
		select {
		case <-b.more:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %q (x%d); have %q", want, n, tail(b.String()))
		}
	}
}

func tail(s string) string {
	if len(s) > 400 {
		return "..." + s[len(s)-400:]
	}
	return s
}

// rawClient is a socket client speaking the protocol by hand.
type rawClient struct {
	conn *net.UnixConn
	out  *syncBuffer
	done chan struct{}
}

// dial connects to the terminal and sends the mode line (and extra bytes).
func dial(t *testing.T, socket, hello string) *rawClient {
	t.Helper()
	c, err := fsops.DialUnix(socket, testTimeout) // at any path length
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{conn: c, out: newSyncBuffer(), done: make(chan struct{})}
	if _, err := rc.conn.Write([]byte(hello)); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(rc.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := rc.conn.Read(buf)
			rc.out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { rc.conn.Close() })
	return rc
}

func (c *rawClient) send(t *testing.T, s string) {
	t.Helper()
	if _, err := c.conn.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// closed waits until the server has closed the connection.
func (c *rawClient) closed(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(testTimeout):
		t.Fatalf("connection still open; received %q", tail(c.out.String()))
	}
}

// readEvents returns the terminal record's events.
func readEvents(t *testing.T, path string) []Event {
	t.Helper()
	var evs []Event
	if err := scanEvents(path, func(ev *Event) error { evs = append(evs, *ev); return nil }); err != nil {
		t.Fatal(err)
	}
	return evs
}

func eventsOfType(evs []Event, typ string) []Event {
	var out []Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func replayed(t *testing.T, path string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Replay(path, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// waitEvent waits until the record holds an event of typ matching ok.
func waitEvent(t *testing.T, path, typ string, ok func(Event) bool) Event {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for time.Now().Before(deadline) {
		var found *Event
		_ = scanEvents(path, func(ev *Event) error {
			if ev.Type == typ && (ok == nil || ok(*ev)) {
				e := *ev
				found = &e
			}
			return nil
		})
		if found != nil {
			return *found
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s event in %s", typ, path)
	return Event{}
}

type failingReader struct{ t *testing.T }

func (r failingReader) Read([]byte) (int, error) {
	r.t.Error("watch mode read its input")
	return 0, io.EOF
}

// ReadExit returns the exit code recorded by the last process.exit event
// in eventsFile; found is false while the process has not exited (or the
// record was cut short).
func ReadExit(eventsFile string) (code int, found bool, err error) {
	err = scanEvents(eventsFile, func(ev *Event) error {
		if ev.Type == EventExit {
			if ev.ExitCode == nil {
				return errors.New("process.exit without exit_code")
			}
			code, found = *ev.ExitCode, true
		}
		return nil
	})
	return code, found, err
}

// Output queues PTY output for the record. p must not be modified
// afterwards.
func (r *recorder) Output(p []byte) { r.output(chunk{p: p}) }

// Write keeps p, which must not be modified afterwards.
func (s *scrollback) Write(p []byte) { s.add(chunk{p: p}) }
