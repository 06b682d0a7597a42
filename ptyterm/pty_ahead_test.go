package ptyterm

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A command started on a PTY opened ahead (OpenPTY, Prepare, Started) is
// served as one Serve starts: its terminal is the PTY, of the asked size,
// and its output is recorded.
func TestServePTYOpenedAhead(t *testing.T) {
	dir := t.TempDir()
	base := Config{Console: ConsoleNone, Size: Winsize{Rows: 33, Cols: 99}}
	p, err := OpenPTY(base)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "test -t 0 && test -t 1 && echo on-a-tty; stty size")
	p.Prepare(cmd)
	if err := cmd.Start(); err != nil {
		p.Close()
		t.Fatal(err)
	}
	p.Started()
	cfg := base
	cfg.Cmd, cfg.PTY, cfg.Events = cmd, p, filepath.Join(dir, "events.jsonl")
	status, err := Serve(cfg)
	if err != nil || status != 0 {
		t.Fatalf("Serve: %d %v", status, err)
	}
	out := string(replayed(t, cfg.Events))
	if !strings.Contains(out, "on-a-tty") || !strings.Contains(out, "33 99") {
		t.Fatalf("recorded %q", out)
	}
	evs := checkRecord(t, cfg.Events, 1)
	if evs[0].Type != EventStart || evs[0].PID != cmd.Process.Pid {
		t.Fatalf("first event %+v, want process.start of %d", evs[0], cmd.Process.Pid)
	}
}

// When Serve cannot set up (here: a console that is not a terminal), the PTY
// opened ahead is closed: the command started on it sees its terminal
// hang up instead of waiting for a server that never comes.
func TestServePTYAheadClosedOnSetupError(t *testing.T) {
	p, err := OpenPTY(Config{Console: ConsoleNone})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "read line; echo got:$line")
	p.Prepare(cmd)
	if err := cmd.Start(); err != nil {
		p.Close()
		t.Fatal(err)
	}
	p.Started()
	_, err = Serve(Config{Cmd: cmd, PTY: p, Console: ConsoleTTY, ConsoleIn: strings.NewReader("")})
	var se *SetupError
	if !errors.As(err, &se) {
		t.Fatalf("Serve: %v, want a SetupError", err)
	}
	// The master is closed: the shell's terminal hangs up and it ends
	// (it would wait for its line forever on an open one).
	if _, werr := p.master.Write([]byte("x\n")); werr == nil {
		t.Fatal("the PTY's master is still open")
	}
	cmd.Wait()
}
