package ptyterm

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// humanTerminal is a PTY standing in for the terminal a person types at:
// the program under test gets the slave as its stdin/stdout, the test types
// into the master and reads the screen from it.
type humanTerminal struct {
	master, slave *os.File
	screen        *syncBuffer
}

func newHumanTerminal(t *testing.T, rows, cols uint16) *humanTerminal {
	t.Helper()
	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(m, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	h := &humanTerminal{master: m, slave: s, screen: newSyncBuffer()}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			h.screen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { s.Close(); m.Close() })
	return h
}

func (h *humanTerminal) typeKeys(t *testing.T, s string) {
	t.Helper()
	if _, err := h.master.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func (h *humanTerminal) termios(t *testing.T) *unix.Termios {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(h.slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio
}

// resize changes the human terminal's size and delivers SIGWINCH to this
// process, as the kernel would to a foreground process of that terminal.
func (h *humanTerminal) resize(t *testing.T, rows, cols uint16) {
	t.Helper()
	if err := pty.Setsize(h.master, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
}

func shell() *exec.Cmd {
	cmd := exec.Command("/bin/sh")
	cmd.Env = []string{"PS1=$ ", "PATH=/usr/bin:/bin", "TERM=dumb"}
	return cmd
}

func TestConnectAttachOnTerminal(t *testing.T) {
	s := serve(t, Config{Cmd: shell()})
	human := newHumanTerminal(t, 40, 120)
	before := human.termios(t)

	type result struct {
		end End
		err error
	}
	done := make(chan result, 1)
	go func() {
		end, err := Connect(s.socket, Attach, human.slave, human.slave, ClientOptions{TrustedServerUIDs: []int{os.Getuid()}})
		done <- result{end, err}
	}()
	// The window size is sent with the mode line.
	waitEvent(t, s.events, EventResize, func(ev Event) bool { return ev.Rows == 40 && ev.Cols == 120 })
	if human.termios(t).Lflag&unix.ICANON != 0 {
		t.Fatal("attached terminal is not in raw mode")
	}
	human.typeKeys(t, "stty size\r")
	human.screen.waitFor(t, "40 120\r\n", 1)

	human.resize(t, 50, 132)
	waitEvent(t, s.events, EventResize, func(ev Event) bool { return ev.Rows == 50 && ev.Cols == 132 })
	human.typeKeys(t, "stty size\r")
	human.screen.waitFor(t, "50 132\r\n", 1)

	// Ctrl-C reaches the agent's terminal, not the client.
	human.typeKeys(t, "sleep 30\r")
	time.Sleep(200 * time.Millisecond)
	human.typeKeys(t, "\x03")
	human.typeKeys(t, "echo after-interrupt\r")
	human.screen.waitFor(t, "after-interrupt\r\n", 1)

	// "~~" at a line start sends one "~"; "~" elsewhere is ordinary.
	human.typeKeys(t, "~~/x a~.b\r")
	human.screen.waitFor(t, "~/x: not found", 1)

	// Enter ~ . detaches.
	human.typeKeys(t, "\r~.")
	select {
	case r := <-done:
		if r.err != nil || r.end != EndDetached {
			t.Fatalf("Connect: %v %v", r.end, r.err)
		}
	case <-time.After(testTimeout):
		t.Fatal("detach sequence did not detach")
	}
	after := human.termios(t)
	if *after != *before {
		t.Fatalf("terminal mode not restored:\n%+v\n%+v", before, after)
	}
	waitEvent(t, s.events, EventDetach, func(ev Event) bool { return ev.Mode == "attach" })
	if err := unix.Kill(s.pid, 0); err != nil {
		t.Fatal("the command did not survive the detach")
	}

	// Attach again from a script (no terminal): input is sent as is.
	out := newSyncBuffer()
	end, err := Connect(s.socket, Attach, strings.NewReader("exit 5\n"), out, ClientOptions{})
	if err != nil || end != EndClosed {
		t.Fatalf("second attach: %v %v", end, err)
	}
	if code := s.wait(); code != 5 {
		t.Fatalf("exit %d", code)
	}
}

func TestConnectWatch(t *testing.T) {
	s := serve(t, Config{Cmd: shell()})
	// The command's echo and its output differ ("fir''st" is printed
	// "first"): the echo may be cut by the shell's first prompt when the
	// line arrives before the shell reads, the output never is.
	a := dial(t, s.socket, "attach\necho fir''st\n")
	a.out.waitFor(t, "first\r\n", 1)
	out := newSyncBuffer()
	done := make(chan error, 1)
	go func() {
		// A watcher's input is never read: this reader would fail the test.
		_, err := Connect(s.socket, Watch, failingReader{t}, out, ClientOptions{})
		done <- err
	}()
	out.waitFor(t, "first\r\n", 1) // scrollback
	a.send(t, "echo second; exit 0\n")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "second\r\n") {
		t.Fatalf("watcher got %q", out.String())
	}
	s.wait()
}

func TestConnectErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Connect(dir+"/none.sock", Watch, nil, newSyncBuffer(), ClientOptions{})
	var pe *os.PathError
	if !errors.As(err, &pe) || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing socket: %v", err)
	}
	s := serve(t, Config{}, "cat")
	_, err = Connect(s.socket, Watch, nil, newSyncBuffer(), ClientOptions{TrustedServerUIDs: []int{4242}})
	if err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("untrusted server: %v", err)
	}
	a := dial(t, s.socket, "attach\n\x04")
	s.wait()
	a.closed(t)
}

func TestTTYConsole(t *testing.T) {
	human := newHumanTerminal(t, 40, 120)
	before := human.termios(t)
	s := serve(t, Config{Cmd: shell(), Console: ConsoleTTY, ConsoleIn: human.slave, ConsoleOut: human.slave})
	if human.termios(t).Lflag&unix.ICANON != 0 {
		t.Fatal("console terminal is not in raw mode")
	}
	human.typeKeys(t, "stty size\r")
	human.screen.waitFor(t, "40 120\r\n", 1)
	human.resize(t, 30, 90)
	waitEvent(t, s.events, EventResize, func(ev Event) bool { return ev.Rows == 30 && ev.Cols == 90 })
	human.typeKeys(t, "stty size\r")
	human.screen.waitFor(t, "30 90\r\n", 1)

	// The console holds the attach slot; watching is fine.
	busy := dial(t, s.socket, "attach\n")
	busy.closed(t)
	if !strings.HasPrefix(busy.out.String(), "ctxterm: busy: ") {
		t.Fatalf("attach beside the console: %q", busy.out.String())
	}
	w := dial(t, s.socket, "watch\n")
	w.out.waitFor(t, "30 90\r\n", 1)

	human.typeKeys(t, "exit 4\r")
	if code := s.wait(); code != 4 {
		t.Fatalf("exit %d", code)
	}
	if after := human.termios(t); *after != *before {
		t.Fatal("console terminal mode not restored")
	}
}

func TestTTYConsoleRequiresTerminal(t *testing.T) {
	_, err := Serve(Config{Cmd: exec.Command("true"), Console: ConsoleTTY, ConsoleIn: strings.NewReader("")})
	var se *SetupError
	if !errors.As(err, &se) || se.Code != 1 {
		t.Fatalf("got %v", err)
	}
}
