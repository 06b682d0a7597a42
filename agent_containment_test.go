package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// TestAgentCannotReachCallerTerminal starts an agent the way a script in a
// person's terminal does (stdin not a terminal, stdout and stderr the
// terminal, which is the caller's controlling terminal) and has it push a
// command into that terminal with TIOCSTI, through its descriptors and
// through /dev/tty. The first round's agent did exactly that. Afterwards the
// terminal's input queue, what the person's shell would read next, must be
// empty.
func TestAgentCannotReachCallerTerminal(t *testing.T) {
	root, ws := newAgentTree(t, "tty-")
	attack, err := os.ReadFile(filepath.Join(binDir, "ctx-attack"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "attack"), attack, 0o755); err != nil {
		t.Fatal(err)
	}

	master, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer tty.Close()
	cmd := exec.Command(filepath.Join(binDir, "ctx"), "agent", "start", "--root", root, "coder", "--", "/workspace/attack", "tiocsti")
	cmd.Dir = ws
	cmd.Stdout, cmd.Stderr = tty, tty // stdin: /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 1}
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&out, master); close(copied) }()
	if err := cmd.Run(); err != nil {
		t.Fatalf("ctx agent start: %v\n%s", err, out.String())
	}
	time.Sleep(200 * time.Millisecond) // let the last output through the PTY

	// What the person's shell would read next: nothing.
	ttyFD := int(tty.Fd()) // once: Fd() puts the file back in blocking mode
	if err := unix.SetNonblock(ttyFD, true); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	if n, err := unix.Read(ttyFD, buf); n > 0 {
		t.Errorf("the agent pushed %q into the caller's terminal input", buf[:n])
	} else if err != unix.EAGAIN {
		t.Errorf("reading the terminal's input queue: %v, want EAGAIN (empty)", err)
	}
	// With our copy of the terminal closed too, the master reads EIO and
	// the copy ends.
	tty.Close()
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal was still held open after the run")
	}
	got := out.String()
	for _, want := range []string{"open-dev-tty=ENXIO", "terminal-fd0=no", "terminal-fd1=no", "terminal-fd2=no"} {
		if !strings.Contains(got, want) {
			t.Errorf("agent output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=ok") {
		t.Errorf("an injection succeeded:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "PWNED")); err == nil {
		t.Error("PWNED exists")
	}
}
