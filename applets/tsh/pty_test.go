package tsh

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests run tsh as a real process (this test binary in helper mode)
// on a real pseudo-terminal and type at it, the way a person or ctxterm
// does.

// expectTimeout bounds each wait for output; it is a deadline against a
// hung test, not a timing assertion.
const expectTimeout = 20 * time.Second

type ptySession struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	buf    []byte
	mark   int // output before mark has been matched already
	done   chan struct{}
}

// openPTY returns a new pseudo-terminal pair, window 80x24 unless cols.
func openPTY(t *testing.T, cols uint16) (master, slave *os.File) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}); err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(m), "ptmx"), os.NewFile(uintptr(s), "pts")
}

// startTsh starts tsh on a new terminal with --root root and env.
func startTsh(t *testing.T, root string, cols uint16, env ...string) *ptySession {
	t.Helper()
	master, slave := openPTY(t, cols)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "--root", root)
	cmd.Env = append([]string{"TSH_TEST_HELPER=1", "TERM=xterm"}, env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	s := &ptySession{t: t, master: master, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			s.mu.Lock()
			s.buf = append(s.buf, b[:n]...)
			s.mu.Unlock()
			if err != nil { // EIO once tsh and its tools have closed the terminal
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		master.Close()
	})
	return s
}

// expect waits until the output after the mark contains want and moves the
// mark past it.
func (s *ptySession) expect(want string) {
	s.t.Helper()
	deadline := time.Now().Add(expectTimeout)
	for {
		s.mu.Lock()
		i := bytes.Index(s.buf[s.mark:], []byte(want))
		if i >= 0 {
			s.mark += i + len(want)
			s.mu.Unlock()
			return
		}
		out := string(s.buf[s.mark:])
		s.mu.Unlock()
		if time.Now().After(deadline) {
			s.t.Fatalf("waiting for %q; output since last match:\n%q", want, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// since returns the output after the mark.
func (s *ptySession) since() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.buf[s.mark:])
}

func (s *ptySession) send(keys string) {
	s.t.Helper()
	if _, err := s.master.Write([]byte(keys)); err != nil {
		s.t.Fatal(err)
	}
}

// wait waits for tsh to exit and returns its exit code.
func (s *ptySession) wait() int {
	s.t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- s.cmd.Wait() }()
	select {
	case err := <-errc:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			s.t.Fatal(err)
		}
		return 0
	case <-time.After(expectTimeout):
		s.t.Fatalf("tsh did not exit; output:\n%q", s.since())
	}
	return -1
}

const (
	keyUpSeq    = "\x1b[A"
	keyDownSeq  = "\x1b[B"
	keyRightSeq = "\x1b[C"
	keyLeftSeq  = "\x1b[D"
	keyHomeSeq  = "\x1b[H"
	keyEndSeq   = "\x1b[F"
	keyDelSeq   = "\x1b[3~"
)

func TestPTYLineEditing(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "alpha", "")
	f.script(t, f.sys, "beta", "")
	s := startTsh(t, f.root.Dir, 80)
	s.expect(Prompt)
	// Typo fixed with Left and insert: "wich alpha" -> "which alpha".
	s.send("wich alpha" + keyHomeSeq + keyRightSeq + "h\r")
	s.expect(f.sys + "/alpha\r\n")
	s.expect(Prompt)
	// Backspace and Delete; Ctrl-A / Ctrl-E as Home / End.
	s.send("which betaXY\x7f\x7f" + "\x01" + keyDelSeq + "w" + "\x05" + "\r")
	s.expect(f.sys + "/beta\r\n")
	s.expect(Prompt)
	// ESC O H / ESC [ 4 ~ (other terminals' Home/End), Ctrl-K, Ctrl-U, Ctrl-W.
	s.send("garbage\x15which alphaZZZ" + keyLeftSeq + keyLeftSeq + keyLeftSeq + "\x0b\r")
	s.expect(f.sys + "/alpha\r\n")
	s.send("which beta gone\x17\x17 beta\x1bOH\x1b[4~\r")
	s.expect(f.sys + "/beta\r\n")
	s.expect(Prompt)
	// Unprintable input is not inserted: ESC sequences we do not know and
	// C1 controls vanish.
	s.send("which \x1b[99zal\u009bpha\r")
	s.expect(f.sys + "/alpha\r\n")
	s.send("exit 3\r")
	if code := s.wait(); code != 3 {
		t.Fatalf("exit code %d", code)
	}
}

func TestPTYHistory(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "alpha", "")
	f.script(t, f.sys, "beta", "")
	s := startTsh(t, f.root.Dir, 80)
	s.expect(Prompt)
	s.send("which alpha\r")
	s.expect(f.sys + "/alpha\r\n")
	s.send("which beta\r")
	s.expect(f.sys + "/beta\r\n")
	s.send("which beta\r") // a repeat is stored once
	s.expect(f.sys + "/beta\r\n")
	s.expect(Prompt)
	// Up twice reaches "which alpha" (the repeat was not stored twice).
	s.send(keyUpSeq + keyUpSeq + "\r")
	s.expect(f.sys + "/alpha\r\n")
	s.expect(Prompt)
	// Down past the newest entry restores the line being typed.
	s.send("type " + keyUpSeq + keyDownSeq + "alpha\r")
	s.expect("alpha is " + f.sys + "/alpha\r\n")
	s.expect(Prompt)
	// Ctrl-P / Ctrl-N walk the history too; an edited recall runs edited.
	s.send("\x10\x10\x10" + "\x0e" + keyEndSeq + "\x7f\x7f\x7f\x7f\x7falpha\r")
	s.expect(f.sys + "/alpha\r\n")
	s.expect(Prompt)
	// Ctrl-D on an empty line ends tsh with the last status.
	s.send("which nope\r")
	s.expect("try: tools\r\n")
	s.expect(Prompt)
	s.send("\x04")
	if code := s.wait(); code != 1 {
		t.Fatalf("exit code %d, want the last status 1", code)
	}
}

func TestPTYInterruptAndErrors(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "alpha", "")
	s := startTsh(t, f.root.Dir, 80)
	s.expect(Prompt)
	// Ctrl-C abandons the line: nothing runs, a fresh prompt follows.
	s.send("which nope\x03")
	s.expect("^C\r\n" + Prompt)
	s.send("which alpha\r")
	s.expect(f.sys + "/alpha\r\n")
	if strings.Contains(s.since(), "nope") {
		t.Fatalf("interrupted line ran: %q", s.since())
	}
	// Quoting errors are reported and the REPL goes on.
	s.send("which \"alpha\r")
	s.expect("tsh: unterminated double quote\r\n")
	s.send("which 'alpha\r")
	s.expect("tsh: unterminated single quote\r\n")
	s.send("which alpha\\\r")
	s.expect("tsh: trailing backslash\r\n")
	s.send("which 'al'\"pha\"\r")
	s.expect(f.sys + "/alpha\r\n")
	// Ctrl-D on a non-empty line deletes under the cursor instead of
	// ending the session.
	s.send("which alphaX" + keyLeftSeq + "\x04\r")
	s.expect(f.sys + "/alpha\r\n")
	s.expect(Prompt)
	s.send("quit\r")
	if code := s.wait(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestPTYLongLineWraps(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "alpha", "")
	s := startTsh(t, f.root.Dir, 20)
	s.expect(Prompt)
	// 5 + 40 columns on a 20-column terminal: three rows. Edit the start
	// of the line from the end and run it.
	s.send("wXich alpha" + strings.Repeat(" ", 30) + keyHomeSeq + keyRightSeq + keyDelSeq + "h" + keyEndSeq + "\r")
	s.expect(f.sys + "/alpha\r\n")
	s.expect(Prompt)
	s.send("exit\r")
	if code := s.wait(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// Tools run on the terminal in its normal mode; ^C while one runs is the
// tool's, tsh survives and reports 128+SIGINT.
func TestPTYToolRunsAndInterrupt(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(f.root.Dir, "fs.read-ran")
	f.script(t, f.sys, "ask", `printf 'name? '; read n; echo "hello $n"`)
	f.script(t, f.sys, "sleeper", `echo sleeping; exec sleep 30`)
	f.script(t, f.sys, "fs.read", "touch "+marker)
	f.script(t, f.sys, "breaker", "stty raw -echo")
	s := startTsh(t, f.root.Dir, 80, "TSH_TEST_ALLOW=1", "CTX_AGENT=coder", "CTX_SESSION=default", "CTX_RUN_ID=r1")
	s.expect(Prompt)
	// A tool reading the terminal gets cooked-mode input (echo, line).
	s.send("ask\r")
	s.expect("name? ")
	s.send("world\r")
	s.expect("world\r\nhello world\r\n")
	s.expect(Prompt)
	// A tool that leaves the terminal raw and silent does not leave it so
	// for the next one: the mode of the first prompt is restored.
	s.send("breaker\r")
	s.expect(Prompt)
	s.send("ask\r")
	s.expect("name? ")
	s.send("again\r")
	s.expect("again\r\nhello again\r\n")
	s.expect(Prompt)
	s.send("sleeper\r")
	s.expect("sleeping\r\n")
	s.send("\x03")
	s.expect(Prompt)
	// In the REPL on a terminal, fs.read without arguments would wait on
	// this very terminal: tsh prints a hint instead and does not run it.
	s.send("fs.read\r")
	s.expect("tsh: fs.read needs input; pass arguments instead of leaving stdin open (see: help fs.read)\r\n")
	s.expect(Prompt)
	s.send("\x04")
	if code := s.wait(); code != 2 {
		t.Fatalf("exit code %d, want 2 (the hint's status)", code)
	}
	if exists(marker) {
		t.Fatal("fs.read ran with no arguments from the REPL terminal")
	}
}

func TestPTYInterruptStatus(t *testing.T) {
	f := newFixture(t)
	f.script(t, f.sys, "sleeper", `echo sleeping; exec sleep 30`)
	s := startTsh(t, f.root.Dir, 80, "TSH_TEST_ALLOW=1", "CTX_AGENT=coder", "CTX_SESSION=default", "CTX_RUN_ID=r1")
	s.expect(Prompt)
	s.send("sleeper\r")
	s.expect("sleeping\r\n")
	s.send("\x03")
	s.expect(Prompt)
	s.send("exit\r")
	if code := s.wait(); code != 128+int(syscall.SIGINT) {
		t.Fatalf("exit code %d, want %d", code, 128+int(syscall.SIGINT))
	}
}
