package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// LookPath takes the first regular file with an execute bit in an
// absolute directory of the PATH it is given, never ctx's own.
func TestLookPath(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(a, "tool"), []byte("#!/bin/sh\n"), 0o644) // no execute bit
	os.Mkdir(filepath.Join(a, "dir"), 0o755)                             // not a file
	os.WriteFile(filepath.Join(b, "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(b, "dir"), []byte("#!/bin/sh\n"), 0o755)
	t.Chdir(b) // a relative entry would find b's files
	path := "rel:.::" + a + ":" + b
	for name, want := range map[string]string{"tool": filepath.Join(b, "tool"), "dir": filepath.Join(b, "dir"), "x/y": "x/y"} {
		if got, err := LookPath(name, path); got != want || err != nil {
			t.Errorf("LookPath(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	if got, err := LookPath("tool", ".:"+a); err != ErrNotFound {
		t.Errorf("LookPath in a relative dir = %q, %v; want ErrNotFound", got, err)
	}
	env := []string{"PATH=/nope", "HOME=/", "PATH=" + b}
	if EnvPath(env, "/d") != b || EnvPath(nil, "/d") != "/d" {
		t.Errorf("EnvPath: %q %q", EnvPath(env, "/d"), EnvPath(nil, "/d"))
	}
}

// A real child's end maps to the shell's status: its exit code, or 128+N
// for signal N.
func TestExitCode(t *testing.T) {
	for script, want := range map[string]int{"exit 3": 3, "kill -KILL $$": 137, "kill -TERM $$": 143, "true": 0} {
		cmd := exec.Command("/bin/sh", "-c", script)
		_ = cmd.Run()
		if got := ExitCode(cmd.ProcessState); got != want {
			t.Errorf("%s: ExitCode %d, want %d", script, got, want)
		}
	}
	if ExitCode(nil) != -1 {
		t.Errorf("ExitCode(nil) = %d", ExitCode(nil))
	}
}
