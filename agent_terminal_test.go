package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"ctx/applets/cli"
)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitDeadline bounds every wait of these tests: generous, because a
// loaded machine (the whole suite on two cores) can take seconds to start
// a sandbox; a wait ends as soon as its condition holds.
const waitDeadline = 60 * time.Second

// waitFor polls ok until it holds, or fails the test after waitDeadline
// with what the test saw so far (seen names each stream and its text).
func waitFor(t *testing.T, what string, seen func() string, ok func() bool) {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > waitDeadline {
			t.Fatalf("timed out after %s waiting for %s; saw:\n%s", waitDeadline, what, seen())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDone waits for a process's Wait result on done, or fails the test
// after waitDeadline with what it saw (the process is killed).
func waitDone(t *testing.T, what string, done <-chan error, proc *os.Process, seen func() string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitDeadline):
		proc.Kill()
		t.Fatalf("timed out after %s waiting for %s; saw:\n%s", waitDeadline, what, seen())
		return nil
	}
}

// streams renders named outputs for a failure message, escaped so that a
// terminal's control sequences show as text.
func streams(named ...any) func() string {
	return func() string {
		var b strings.Builder
		for i := 0; i+1 < len(named); i += 2 {
			text := strings.ReplaceAll(named[i+1].(fmt.Stringer).String(), "\r\n", "\n")
			fmt.Fprintf(&b, "--- %s ---\n%s\n", named[i], cli.EscapeLines(text))
		}
		return b.String()
	}
}

// fileText is a file's content as a fmt.Stringer, read when printed.
type fileText string

func (f fileText) String() string {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func ctxCmd(root string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(binDir, "ctx"), append([]string{"agent"}, args...)...)
	cmd.Env = append(os.Environ(), "CTX_ROOT="+root)
	return cmd
}

// TestAgentTerminal drives a background agent session through its terminal
// socket: two watchers and an attacher at once, a second attacher refused,
// a detach that leaves the agent running, a resize seen by the program, and
// the recorded session replayed.
func TestAgentTerminal(t *testing.T) {
	root, ws := newAgentTree(t, "terminal-")
	script := `echo ready; read a; echo "got:$a"; read b; stty size; echo "got2:$b"`
	start := ctxCmd(root, "start", "coder", "--no-console", "--", "sh", "-c", script)
	start.Dir = ws
	var startOut syncBuffer
	start.Stdout, start.Stderr = &startOut, &startOut
	if err := start.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- start.Wait() }()
	t.Cleanup(func() { start.Process.Kill() })

	// The agent's own uid names its home (an unprivileged uid of its own
	// in a root tree).
	uid, err := os.ReadFile(filepath.Join(root, "agent", "coder.d", "uid"))
	if err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(root, "home", strings.TrimSpace(string(uid)), "agent", "coder", "session", "default", "terminal", "terminal-coder-default", "events.jsonl")
	var w1, w2, attOut syncBuffer
	seen := streams("ctx agent start", &startOut, "record "+events, fileText(events), "watcher 1", &w1, "watcher 2", &w2, "attacher", &attOut)
	waitFor(t, "the session to start", seen, func() bool {
		b, _ := os.ReadFile(events)
		return bytes.Contains(b, []byte("pty.output"))
	})

	// Two watchers, joined after "ready" was printed: they get it from the
	// scrollback, then everything live.
	watchers := []*exec.Cmd{ctxCmd(root, "watch", "coder"), ctxCmd(root, "watch", "coder")}
	for i, w := range watchers {
		w.Stdout = []io.Writer{&w1, &w2}[i]
		w.Stdin = nil
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "watchers to see the scrollback", seen, func() bool {
		return strings.Contains(w1.String(), "ready") && strings.Contains(w2.String(), "ready")
	})

	// An attacher from a pipe sends a line.
	att := ctxCmd(root, "attach", "coder")
	attIn, err := att.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	att.Stdout, att.Stderr = &attOut, &attOut
	if err := att.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the attacher to join", seen, func() bool { return strings.Contains(attOut.String(), "ready") })

	// A second attacher is refused while the first holds the slot.
	second := ctxCmd(root, "attach", "coder")
	second.Stdin = strings.NewReader("intruder\n")
	out, err := second.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 69 || !strings.Contains(string(out), "busy") {
		t.Fatalf("second attacher: %v\n%s\n%s", err, out, seen())
	}
	// The refusal names the way to attach from a second terminal.
	if !strings.Contains(string(out), "start it with --no-console to attach from elsewhere, or watch") {
		t.Errorf("second attacher's refusal names no way on:\n%s", out)
	}

	io.WriteString(attIn, "hello\n")
	waitFor(t, "the program to get the line", seen, func() bool {
		return strings.Contains(w1.String(), "got:hello") && strings.Contains(w2.String(), "got:hello")
	})
	if strings.Contains(w1.String(), "intruder") {
		t.Fatal("the refused attacher's input reached the terminal")
	}
	// The attacher leaves; the agent keeps running.
	att.Process.Kill()
	att.Wait()
	if st, _ := ctxCmd(root, "status", "coder").Output(); !bytes.HasPrefix(st, []byte("ready\n")) {
		t.Fatalf("after the attacher left: status %q\n%s", st, seen())
	}

	// Attach again from a real terminal of 33x111: the size reaches the
	// program (stty size) before the next line does.
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	pty.Setsize(ptmx, &pty.Winsize{Rows: 33, Cols: 111})
	att2 := ctxCmd(root, "attach", "coder")
	att2.Stdin, att2.Stdout, att2.Stderr = tty, tty, tty
	if err := att2.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var termOut syncBuffer
	go io.Copy(&termOut, ptmx)
	seen2 := streams("terminal attacher", &termOut)
	seenAll := func() string { return seen() + seen2() }
	// The attacher has joined once it replayed the scrollback; only then
	// does a line typed on its terminal reach the program.
	waitFor(t, "the terminal attacher to join", seenAll, func() bool { return strings.Contains(termOut.String(), "got:hello") })
	// A person on a terminal is told how to leave; a pipe is not.
	if !strings.Contains(termOut.String(), "[attached to coder, session default: Enter ~ . detaches; the agent keeps running]") {
		t.Errorf("no detach banner on the attacher's terminal:\n%q", termOut.String())
	}
	if strings.Contains(attOut.String(), "[attached") || strings.Contains(w1.String(), "[watching") {
		t.Errorf("a banner went into a pipe:\n%q\n%q", attOut.String(), w1.String())
	}
	io.WriteString(ptmx, "world\r")
	waitFor(t, "the program to end", seenAll, func() bool { return strings.Contains(w1.String(), "got2:world") })
	if !strings.Contains(w1.String(), "33 111") {
		t.Errorf("the attacher's window size did not reach the program:\n%q", w1.String())
	}
	if err := waitDone(t, "ctx agent start to end with its program", done, start.Process, seenAll); err != nil {
		t.Fatalf("agent start: %v\n%s", err, seenAll())
	}
	for _, w := range watchers {
		w.Wait()
	}
	att2.Wait()

	// The record replays what the program wrote.
	replay, err := exec.Command(filepath.Join(binDir, "ctx"), "ctxterm", "--replay", events).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ready", "got:hello", "33 111", "got2:world"} {
		if !bytes.Contains(replay, []byte(want)) {
			t.Errorf("replay lacks %q:\n%q", want, replay)
		}
	}
	if b, _ := os.ReadFile(events); !bytes.Contains(b, []byte(`"type":"process.exit"`)) {
		t.Error("no process.exit in the record")
	}
	if _, err := os.Lstat(filepath.Join(root, "home", strings.TrimSpace(string(uid)), "agent", "coder", "session", "default", "terminal", "main.sock")); err == nil {
		t.Error("the terminal locator outlived the run")
	}
}

// TestAgentStartOnTerminal is `ctx agent start coder` from a person's
// terminal: tsh's prompt inside the sandbox at /workspace, a tool call,
// exit, and the terminal left as it was.
func TestAgentStartOnTerminal(t *testing.T) {
	root, ws := newAgentTree(t, "tty-")
	os.WriteFile(filepath.Join(ws, "hi.txt"), []byte("hello from the workspace\n"), 0o644)
	cmd := ctxCmd(root, "start", "coder")
	cmd.Dir = ws
	cmd.Env = append(cmd.Env, "TERM=xterm")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var screen syncBuffer
	go io.Copy(&screen, ptmx)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	seen := streams("terminal", &screen)
	// A wait also ends, with what was seen, when ctx agent start ended.
	until := func(what string, ok func() bool) {
		t.Helper()
		waitFor(t, what, seen, func() bool {
			select {
			case err := <-done:
				t.Fatalf("ctx agent start ended (%v) before %s; saw:\n%s", err, what, seen())
			default:
			}
			return ok()
		})
	}
	until("the tsh prompt", func() bool { return strings.Contains(screen.String(), "tsh> ") })
	io.WriteString(ptmx, "fs.read hi.txt\r")
	until("the tool's output", func() bool { return strings.Contains(screen.String(), "hello from the workspace") })
	io.WriteString(ptmx, "shell.exec 'pwd; stty size </dev/tty'\r")
	until("the sandbox's cwd and size", func() bool {
		return strings.Contains(screen.String(), "/workspace") && strings.Contains(screen.String(), "30 100")
	})
	io.WriteString(ptmx, "exit\r")
	if err := waitDone(t, "tsh to exit", done, cmd.Process, seen); err != nil {
		t.Fatalf("agent start: %v\n%s", err, seen())
	}
}
