package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAuditFailsClosedOnFullDisk: the filesystem of the tree is filled
// while a run serves tool calls (a hostile agent, or anything else on the
// host, filling the disk to run calls unrecorded). Every call that
// returned 0 has its event in the session's events, the agent's log and
// the tool's log; every other call exited 69 with one line saying why; no
// line of any log is torn or appended onto a partial one; once room is
// freed, calls work and are recorded again.
func TestAuditFailsClosedOnFullDisk(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	_, ws := newAgentTree(t, "auditdisk-")
	fs := filepath.Join(filepath.Dir(ws), "fs")
	if err := os.Mkdir(fs, 0o755); err != nil {
		t.Fatal(err)
	}
	// The tmpfs is mounted in a mount namespace of this test's thread
	// (locked to it, ended with it), which every process the test starts
	// inherits: the host's mount table, which other tests compare, never
	// changes.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make mounts private: %v", err)
	}
	if err := unix.Mount("tmpfs", fs, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=24m,mode=0755"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(fs, unix.MNT_DETACH) })
	root := filepath.Join(fs, "r")
	ctx := filepath.Join(binDir, "ctx")
	if out, err := exec.Command(ctx, "bootstrap", "--root", root).CombinedOutput(); err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(ws, "hi.txt"), []byte("hello\n"), 0o644)
	run := exec.Command(ctx, "agent", "start", "--root", root, "coder", "--session", "full", "--",
		"sh", "-c", "while [ ! -e /workspace/stop ]; do sleep 0.05; done")
	run.Dir = ws
	var runErr bytes.Buffer
	run.Stderr = &runErr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		os.WriteFile(filepath.Join(ws, "stop"), nil, 0o644)
		run.Wait()
	}()
	status := filepath.Join(root, "agent", "coder.d", "status")
	waitFor(t, "the run to be ready", streams("run stderr", &runErr), func() bool {
		b, _ := os.ReadFile(status)
		return string(b) == "ready\n"
	})
	call := func() (int, string) {
		cmd := exec.Command(ctx, "run", "--root", root, "coder", "--", "tool", "fs.read", "hi.txt")
		cmd.Dir = ws
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), stderr.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, stderr.String()
	}
	filler := filepath.Join(fs, "filler")
	ok, refused := 0, 0
	for i := 0; i < 50; i++ {
		if i == 10 {
			fill(t, filler, 9000) // room for a few lines more, then none
		}
		code, stderr := call()
		switch {
		case code == 0:
			ok++
		case code == 69 && strings.Count(stderr, "\n") == 1 && strings.Contains(stderr, "could not be written") ||
			code == 69 && strings.Count(stderr, "\n") == 1 && strings.Contains(stderr, "the audit cannot be written"):
			refused++
		default:
			t.Fatalf("call %d: exit %d, %q", i, code, stderr)
		}
	}
	if refused == 0 {
		t.Fatalf("no call was refused on a full disk (%d returned 0)", ok)
	}
	sess := filepath.Join(root, "home", "60101", "agent", "coder", "session", "full", "events.jsonl")
	logs := []string{sess, filepath.Join(root, "agent", "coder.d", "log"), filepath.Join(root, "tool", "fs.read.d", "log")}
	for _, p := range logs {
		if n := countOK(t, p); n != ok {
			t.Errorf("%s: %d fs.read events of status ok, %d calls returned 0", p, n, ok)
		}
	}
	os.Remove(filler)
	if code, stderr := call(); code != 0 {
		t.Fatalf("after room was freed: exit %d, %q", code, stderr)
	}
	for _, p := range logs {
		if n := countOK(t, p); n != ok+1 {
			t.Errorf("after room was freed: %s: %d ok events, want %d", p, n, ok+1)
		}
	}
	if !strings.Contains(runErr.String(), "the audit cannot be written") {
		t.Errorf("the run host did not say why it refuses: %q", runErr.String())
	}
}

// fill writes filler until its filesystem is full, then frees keep bytes.
func fill(t *testing.T, filler string, keep int64) {
	t.Helper()
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var size int64
	for {
		n, err := f.Write(buf)
		size += int64(n)
		if err != nil {
			break
		}
	}
	f.Truncate(max(size-keep, 0))
}

// countOK fails the test on a line of path that is not one JSON object,
// and counts the fs.read tool.call events of status ok.
func countOK(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct{ Type, Object, Status string }
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: a torn line: %v: %.80q", path, err, sc.Text())
		}
		if ev.Type == "tool.call" && ev.Object == "tool/fs.read" && ev.Status == "ok" {
			n++
		}
	}
	return n
}
