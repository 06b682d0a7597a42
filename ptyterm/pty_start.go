package ptyterm

import (
	"os"
	"os/exec"
	"syscall"

	"ctx/fsops/proc"
)

// startOnPTY starts cmd with a new PTY as its terminal and returns the
// master, the pid and the terminal's EOF character. Our copy of the slave
// is closed once the command holds it, so the master reads EOF (EIO) when
// the last process using the terminal is gone. The error is a *SetupError:
// 1 when the PTY could not be opened, proc.StartFailure's status when cmd
// could not be started.
func startOnPTY(cmd *exec.Cmd, size Winsize, owner *[2]int, start func(*exec.Cmd) error) (*os.File, int, byte, error) {
	p, err := openPTYFor(size, owner)
	if err != nil {
		return nil, 0, 0, &SetupError{proc.ExitFailure, err}
	}
	defer p.Started()
	p.Prepare(cmd)
	if start == nil {
		start = (*exec.Cmd).Start
	}
	if err := start(cmd); err != nil {
		p.Close()
		return nil, 0, 0, &SetupError{proc.StartFailure(err), err}
	}
	return p.master, cmd.Process.Pid, p.veof, nil
}

// PTY is a terminal opened before Serve, for a command started on it
// ahead (the run host starts the sandbox's init while it prepares the
// run): OpenPTY, Prepare, the command's start, Started, then Serve with
// Config.PTY.
type PTY struct {
	master, tty *os.File
	veof        byte
}

// OpenPTY opens the PTY Serve would open for cfg: of the console's size
// (or cfg.Size, else DefaultSize), its slave given to cfg.TTYOwner.
func OpenPTY(cfg Config) (*PTY, error) {
	_, size, err := consoleTerminal(cfg)
	if err != nil {
		return nil, err
	}
	return openPTYFor(size, cfg.TTYOwner)
}

func openPTYFor(size Winsize, owner *[2]int) (*PTY, error) {
	master, tty, err := openPTY(size.Rows, size.Cols)
	if err != nil {
		return nil, err
	}
	if owner != nil {
		if err := tty.Chown(owner[0], owner[1]); err != nil {
			master.Close()
			tty.Close()
			return nil, err
		}
	}
	return &PTY{master: master, tty: tty, veof: eofChar(tty)}, nil
}

// Prepare makes cmd's standard files the PTY's slave and cmd a session
// leader with it as its controlling terminal; other SysProcAttr fields
// are kept.
func (p *PTY) Prepare(cmd *exec.Cmd) {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.tty, p.tty, p.tty
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0 // the child's stdin
	cmd.SysProcAttr.Setpgid = false
}

// Started closes our copy of the slave once the command holds it, so the
// master reads EOF (EIO) when the last process using the terminal is gone.
func (p *PTY) Started() {
	if p.tty != nil {
		p.tty.Close()
		p.tty = nil
	}
}

// Close closes the PTY of a command that will not be served.
func (p *PTY) Close() {
	p.Started()
	p.master.Close()
}
