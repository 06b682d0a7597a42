package mcpstdio

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A server that leaves a daemon in a session of its own (setsid, double
// fork): Close ends the daemon too, and reaps it.
func TestClientEndsServerDaemon(t *testing.T) {
	srv, pids := fixtureServer(t, "daemon")
	c, err := Start("d", srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTools(); err != nil {
		t.Fatal(err)
	}
	daemon := recordedPids(t, pids)["daemon"]
	if daemon == 0 || unix.Kill(daemon, 0) != nil {
		t.Fatalf("the daemon is not running (pids %v)", recordedPids(t, pids))
	}
	c.Close()
	assertGone(t, pids, "server", "daemon")
}

// A served tool call ends what the tool left behind, on success and on a
// timeout.
func TestRunBoundedEndsDaemon(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid(1)")
	}
	for _, c := range []struct {
		name, tail string
		timeout    time.Duration
		wantErr    string
	}{
		{"exits", "echo done", time.Minute, ""},
		{"timeout", "exec sleep 300", 200 * time.Millisecond, "timed out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "daemon.pid")
			script := `setsid sh -c 'sleep 300 & echo $! > "$1"' sh "$1" &
while [ ! -s "$1" ]; do sleep 0.01; done
` + c.tail
			res, err := runBounded(context.Background(), "/bin/sh", []string{"sh", "-c", script, "sh", pidfile}, nil, nil, c.timeout, MaxCallOutput, nil)
			switch {
			case c.wantErr == "" && (err != nil || res.status != 0 || truncated(res.stdout) != "done\n"):
				t.Fatalf("runBounded: %+v %v", res, err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("runBounded: %v, want %q", err, c.wantErr)
			}
			b, err := os.ReadFile(pidfile)
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if err := unix.Kill(pid, 0); pid <= 0 || err != unix.ESRCH {
				t.Fatalf("daemon %d still exists (kill 0: %v)", pid, err)
			}
		})
	}
}
