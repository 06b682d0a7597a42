package ptyterm

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// startOnPTY starts cmd with a new PTY as its terminal and returns the
// master, the pid and the terminal's EOF character. Our copy of the slave
// is closed once the command holds it, so the master reads EOF (EIO) when
// the last process using the terminal is gone.
func startOnPTY(cmd *exec.Cmd, size Winsize, owner *[2]int, start func(*exec.Cmd) error) (*os.File, int, byte, error) {
	master, tty, err := openPTY(size.Rows, size.Cols)
	if err != nil {
		return nil, 0, 0, err
	}
	defer tty.Close()
	if owner != nil {
		if err := tty.Chown(owner[0], owner[1]); err != nil {
			master.Close()
			return nil, 0, 0, err
		}
	}
	veof := eofChar(tty)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0 // the child's stdin
	cmd.SysProcAttr.Setpgid = false
	if start == nil {
		start = (*exec.Cmd).Start
	}
	if err := start(cmd); err != nil {
		master.Close()
		return nil, 0, 0, err
	}
	return master, cmd.Process.Pid, veof, nil
}

func startErrorCode(err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return 127
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return 126
	}
	return 1
}
