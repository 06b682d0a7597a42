package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStartFailure: every way a real start can fail maps to 127 when the
// program (or its interpreter) is not there and to 126 otherwise; an errno
// or error handed over wrapped maps as the bare one does.
func TestStartFailure(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noBit := write("nobit", "#!/bin/sh\n", 0o644)
	garbage := write("garbage", "\x00\x01\x02 not a program\n", 0o755)
	noInterp := write("nointerp", "#!"+filepath.Join(dir, "no-such-interpreter")+"\n", 0o755)
	_, lookErr := LookPath("no-such-program-ctx", "/nonexistent")
	for _, tc := range []struct {
		name string
		cmd  *exec.Cmd // started for its error, or nil
		err  error
		want int
	}{
		{"not in PATH", exec.Command("no-such-program-ctx"), nil, ExitNotFound},
		{"missing path", exec.Command(filepath.Join(dir, "missing")), nil, ExitNotFound},
		{"missing directory", exec.Command(filepath.Join(dir, "nodir", "prog")), nil, ExitNotFound},
		{"missing interpreter", exec.Command(noInterp), nil, ExitNotFound},
		{"no execute bit", exec.Command(noBit), nil, ExitNotExec},
		{"not a program", exec.Command(garbage), nil, ExitNotExec},
		{"a directory", exec.Command(dir), nil, ExitNotExec},
		{"a file as a directory", exec.Command(filepath.Join(garbage, "prog")), nil, ExitNotExec},
		{"LookPath", nil, lookErr, ExitNotFound},
		{"bare ENOENT", nil, syscall.ENOENT, ExitNotFound},
		{"wrapped ENOENT", nil, fmt.Errorf("starting: %w", &os.PathError{Op: "fork/exec", Path: "x", Err: syscall.ENOENT}), ExitNotFound},
		{"EACCES", nil, syscall.EACCES, ExitNotExec},
		{"ENOEXEC", nil, syscall.ENOEXEC, ExitNotExec},
		{"EISDIR", nil, syscall.EISDIR, ExitNotExec},
		{"E2BIG", nil, syscall.E2BIG, ExitNotExec},
		{"no errno", nil, fmt.Errorf("no command"), ExitNotExec},
	} {
		err := tc.err
		if tc.cmd != nil {
			if err = tc.cmd.Start(); err == nil {
				tc.cmd.Process.Kill()
				tc.cmd.Wait()
				t.Errorf("%s: started", tc.name)
				continue
			}
		}
		if got := StartFailure(err); got != tc.want {
			t.Errorf("%s: StartFailure(%v) = %d, want %d", tc.name, err, got, tc.want)
		}
	}
}
