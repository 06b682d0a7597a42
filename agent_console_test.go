package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// onTerminal is a command started on a terminal of its own, as a person
// starts it: what the terminal shows, and the wait for the command's end.
type onTerminal struct {
	ptmx   *os.File
	screen *syncBuffer
	done   chan error
	cmd    *exec.Cmd
}

func startOnTerminal(t *testing.T, cmd *exec.Cmd) *onTerminal {
	t.Helper()
	cmd.Env = append(cmd.Env, "TERM=xterm")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	term := &onTerminal{ptmx: ptmx, screen: &syncBuffer{}, done: make(chan error, 1), cmd: cmd}
	go io.Copy(term.screen, ptmx)
	go func() { term.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return term
}

// until waits for ok while the command runs; seen names what to show
// when it does not come.
func (term *onTerminal) until(t *testing.T, what string, seen func() string, ok func() bool) {
	t.Helper()
	waitFor(t, what, seen, func() bool {
		select {
		case err := <-term.done:
			t.Fatalf("the command ended (%v) before %s; saw:\n%s", err, what, seen())
		default:
		}
		return ok()
	})
}

// TestAgentTerminalInterruptBeforePrompt is Ctrl-C on the person's terminal
// during a tool call of tsh in `ctx agent start`: the call's "cancelled"
// line comes before tsh's next prompt, not after it, where it would be
// taken for the answer to whatever the person types next.
func TestAgentTerminalInterruptBeforePrompt(t *testing.T) {
	root, ws := newAgentTree(t, "intr-")
	cmd := ctxCmd(root, "start", "coder")
	cmd.Dir = ws
	term := startOnTerminal(t, cmd)
	seen := streams("terminal", term.screen)
	term.until(t, "the tsh prompt", seen, func() bool { return strings.Contains(term.screen.String(), "tsh> ") })
	io.WriteString(term.ptmx, "shell.exec 'touch started; exec sleep 60'\r")
	term.until(t, "the tool to run", seen, func() bool {
		_, err := os.Stat(filepath.Join(ws, "started"))
		return err == nil
	})
	mark := len(term.screen.String())
	io.WriteString(term.ptmx, "\x03")
	const cancelled = "shell.exec: command cancelled"
	term.until(t, "the cancel line and the next prompt", seen, func() bool {
		after := term.screen.String()[mark:]
		return strings.Contains(after, cancelled) && strings.Contains(after, "tsh> ")
	})
	after := term.screen.String()[mark:]
	if strings.Index(after, cancelled) > strings.Index(after, "tsh> ") {
		t.Errorf("the cancel line came after the next prompt:\n%s", seen())
	}
	// tsh leaves with the last status: the cancelled call's, Ctrl-C's.
	io.WriteString(term.ptmx, "exit\r")
	err := waitDone(t, "tsh to exit", term.done, cmd.Process, seen)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("agent start: %v, want exit status 130\n%s", err, seen())
	}
}

// TestAgentStartNoConsoleOnTerminal is `ctx agent start --no-console`
// from a person's terminal: that terminal gets ctx's own lines (where the
// output goes, how the run ended) and none of the program's output, which
// a watcher on another terminal and an attacher get.
func TestAgentStartNoConsoleOnTerminal(t *testing.T) {
	root, ws := newAgentTree(t, "nocons-")
	// The markers are computed, so the command line never matches them.
	cmd := ctxCmd(root, "start", "coder", "--no-console", "--", "sh", "-c", `echo marker-$((6*7)); read x; echo got-$x-$((6*7))`)
	cmd.Dir = ws
	term := startOnTerminal(t, cmd)
	const banner = "[coder runs without a console, its output is not shown here: ctx agent watch"
	term.until(t, "the starting terminal's banner", streams("starting terminal", term.screen), func() bool {
		return strings.Contains(term.screen.String(), banner)
	})
	watcher := startOnTerminal(t, ctxCmd(root, "watch", "coder"))
	var attached syncBuffer
	seen := streams("starting terminal", term.screen, "watcher's terminal", watcher.screen, "attacher", &attached)

	watcher.until(t, "the watcher to see the program", seen, func() bool { return strings.Contains(watcher.screen.String(), "marker-42") })
	if !strings.Contains(watcher.screen.String(), "[watching coder, session default, read-only: Ctrl-C leaves; the agent keeps running]") {
		t.Errorf("no banner on the watcher's terminal:\n%s", seen())
	}
	att := ctxCmd(root, "attach", "coder")
	att.Stdin, att.Stdout, att.Stderr = strings.NewReader("typed\n"), &attached, &attached
	if err := att.Run(); err != nil {
		t.Fatalf("attach: %v\n%s", err, seen())
	}
	if !strings.Contains(attached.String(), "got-typed-42") {
		t.Errorf("the attacher did not see the program's answer:\n%s", seen())
	}
	waitFor(t, "the watcher to see the answer", seen, func() bool { return strings.Contains(watcher.screen.String(), "got-typed-42") })
	if err := waitDone(t, "the run to end", term.done, cmd.Process, seen); err != nil {
		t.Fatalf("agent start: %v\n%s", err, seen())
	}
	waitFor(t, "the starting terminal to be told how the run ended", seen, func() bool {
		return strings.Contains(term.screen.String(), "[coder's program ended: status 0]")
	})
	for _, output := range []string{"marker-42", "got-typed-42"} {
		if strings.Contains(term.screen.String(), output) {
			t.Errorf("the program's output %q reached the starting terminal:\n%s", output, seen())
		}
	}
	waitDone(t, "the watcher to end", watcher.done, watcher.cmd.Process, seen)
}
