package ptyterm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctx/fsops"
)

// The uid refusal test runs a client as another user: the test binary
// re-executed with PTYTERM_TEST_CLIENT set connects, sends the given bytes,
// and prints everything it receives (with PTYTERM_TEST_DISCARD set, only
// how many bytes: the throughput benchmark's watcher).
func TestMain(m *testing.M) {
	if socket := os.Getenv("PTYTERM_TEST_CLIENT"); socket != "" {
		os.Exit(testClientMain(socket, os.Getenv("PTYTERM_TEST_SEND"), os.Getenv("PTYTERM_TEST_DISCARD") != ""))
	}
	os.Exit(m.Run())
}

func testClientMain(socket, send string, discard bool) int {
	if mode := os.Getenv("PTYTERM_TEST_CONNECT"); mode != "" {
		// Like ctx agent watch: Connect, through the filter unless raw.
		var n countWriter
		_, err := Connect(socket, Watch, nil, &n, ClientOptions{Raw: mode == "raw"})
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			return 3
		}
		fmt.Println(int64(n))
		return 0
	}
	c, err := fsops.DialUnix(socket, 0)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 3
	}
	c.Write([]byte(send))
	c.SetReadDeadline(time.Now().Add(testTimeout))
	if discard {
		// Like a watcher process: big reads, bytes thrown away.
		n, _ := io.CopyBuffer(struct{ io.Writer }{io.Discard}, c, make([]byte, 64<<10))
		fmt.Println(n)
		return 0
	}
	io.Copy(os.Stdout, c)
	return 0
}

// requireRoot skips a test that needs root, unless CI demands it.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CTX_REQUIRE_SANDBOX") != "" {
		t.Fatal("this test needs root and CTX_REQUIRE_SANDBOX is set")
	}
	t.Skip("needs root")
}

func TestPeerWithOtherUIDRefused(t *testing.T) {
	requireRoot(t)
	// A directory and socket that uid 65534 may reach, so that the refusal
	// comes from the SO_PEERCRED check and not from file modes.
	dir, err := os.MkdirTemp("", "ptyterm-uid-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "client")
	copyFile(t, self, exe, 0o755)

	socket := filepath.Join(dir, "main.sock")
	s := serve(t, Config{Socket: socket, Owner: 0}, "sh", "-c", `echo SECRET-SCREEN; cat`)
	if err := os.Chmod(socket, 0o666); err != nil {
		t.Fatal(err)
	}
	w := dial(t, socket, "watch\n")
	w.out.waitFor(t, "SECRET-SCREEN", 1)

	for _, mode := range []string{"attach\nINJECT\n", "watch\n"} {
		cmd := exec.Command(exe)
		cmd.Env = []string{"PTYTERM_TEST_CLIENT=" + socket, "PTYTERM_TEST_SEND=" + mode}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("client as uid 65534: %v: %s", err, stderr.String())
		}
		if want := "ctxterm: denied: uid 65534 may not use this terminal\n"; string(out) != want {
			t.Fatalf("uid 65534 received %q, want only %q", out, want)
		}
		ev := waitEvent(t, s.events, EventRefused, func(ev Event) bool { return ev.UID != nil && *ev.UID == 65534 && ev.PID == cmd.Process.Pid })
		if ev.Reason != "denied" {
			t.Fatalf("refusal recorded as %+v", ev)
		}
	}
	// Nothing of the refused clients reached the terminal, and the
	// owner's session goes on.
	a := dial(t, socket, "attach\nowner\n")
	a.out.waitFor(t, "owner\r\n", 2)
	a.send(t, "\x04")
	s.wait()
	rec := string(replayed(t, s.events))
	if strings.Contains(rec, "INJECT") {
		t.Fatal("a refused client's input reached the PTY")
	}
	for _, ev := range readEvents(t, s.events) {
		if (ev.Type == EventWatch || ev.Type == EventAttach) && *ev.UID == 65534 {
			t.Fatalf("uid 65534 joined: %+v", ev)
		}
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

func TestSocketFileAndDirectories(t *testing.T) {
	root := t.TempDir()
	socket := filepath.Join(root, "run", "user", "terminal", "main.sock")
	s := serve(t, Config{Socket: socket}, "cat")
	st, err := os.Lstat(socket)
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v", st.Mode(), err)
	}
	for d := filepath.Dir(socket); d != root; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v", d, st.Mode(), err)
		}
	}
	// A second terminal on a live socket is refused and changes nothing.
	marker := filepath.Join(root, "second-ran")
	_, err = Serve(Config{Cmd: exec.Command("touch", marker), Socket: socket})
	var se *SetupError
	if !errors.As(err, &se) || se.Code != 1 || !strings.Contains(err.Error(), "in use by a running terminal") {
		t.Fatalf("second Serve on a live socket: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused terminal ran its command")
	}
	a := dial(t, socket, "attach\nstill\n")
	a.out.waitFor(t, "still\r\n", 2)
	a.send(t, "\x04")
	s.wait()
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket not removed: %v", err)
	}
}

// A terminal socket past sun_path's 107 bytes (a deep runtime directory,
// a long session name) is bound, refused to a second terminal as in use,
// reached by the client (Connect) and removed at the end.
func TestSocketPastSunPath(t *testing.T) {
	root := t.TempDir()
	socket := filepath.Join(root, strings.Repeat("t", 60), strings.Repeat("s", 60), "main.sock")
	s := serve(t, Config{Socket: socket, Cmd: shell()}, "")
	if st, err := os.Lstat(socket); err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket at %d bytes: %v", len(socket), err)
	}
	marker := filepath.Join(root, "second-ran")
	_, err := Serve(Config{Cmd: exec.Command("touch", marker), Socket: socket})
	if !strings.Contains(fmt.Sprint(err), "in use by a running terminal") {
		t.Fatalf("second Serve on a live long socket: %v", err)
	}
	// "fir''st" prints what its echo does not hold: the shell's first
	// prompt may cut the echo of a line sent before the shell reads.
	a := dial(t, socket, "attach\necho fir''st\n")
	a.out.waitFor(t, "first\r\n", 1)
	out := newSyncBuffer()
	done := make(chan error, 1)
	go func() {
		_, err := Connect(socket, Watch, failingReader{t}, out, ClientOptions{TrustedServerUIDs: []int{os.Getuid()}})
		done <- err
	}()
	out.waitFor(t, "first\r\n", 1)
	a.send(t, "echo second; exit 0\n")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.wait()
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket not removed: %v", err)
	}
}

func TestSocketPathRefusals(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(root, "ran")
	run := func(socket string) error {
		_, err := Serve(Config{Cmd: exec.Command("touch", marker), Socket: socket, Events: filepath.Join(root, "ev")})
		if _, serr := os.Stat(marker); serr == nil {
			t.Fatalf("%s: the command ran", socket)
		}
		if _, serr := os.Lstat(filepath.Join(root, "ev")); serr == nil {
			t.Fatalf("%s: a record was left behind", socket)
		}
		return err
	}

	regular := filepath.Join(root, "regular.sock")
	os.WriteFile(regular, []byte("keep me\n"), 0o640)
	if err := run(regular); err == nil || !strings.Contains(err.Error(), "exists and is not a socket (a regular file)") {
		t.Fatalf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "keep me\n" {
		t.Fatalf("regular file changed: %q", b)
	}

	target := filepath.Join(root, "target")
	os.WriteFile(target, []byte("target\n"), 0o600)
	link := filepath.Join(root, "link.sock")
	os.Symlink(target, link)
	if err := run(link); err == nil || !strings.Contains(err.Error(), "a symlink") {
		t.Fatalf("symlink: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "target\n" {
		t.Fatal("symlink target changed")
	}
	if dest, _ := os.Readlink(link); dest != target {
		t.Fatal("symlink replaced")
	}

	open := filepath.Join(root, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if err := run(filepath.Join(open, "main.sock")); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("world-writable directory: %v", err)
	}

	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o600)
	if err := run(filepath.Join(file, "sub", "main.sock")); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("file as directory: %v", err)
	}

	if err := run(filepath.Join(root, "x") + "/"); err == nil {
		t.Fatal("a directory path was accepted as socket path")
	}

	// A record that is a symlink is refused too, and not followed.
	evLink := filepath.Join(root, "ev-link")
	os.Symlink(target, evLink)
	_, err := Serve(Config{Cmd: exec.Command("touch", marker), Socket: filepath.Join(root, "ok.sock"), Events: evLink})
	if !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("symlinked record: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "target\n" {
		t.Fatal("symlink target of the record changed")
	}
	if _, err := os.Lstat(filepath.Join(root, "ok.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("socket created although the record was refused")
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "main.sock")
	l, err := fsops.ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // a socket file nobody listens on: left by a dead ctxterm
	s := serve(t, Config{Socket: socket}, "cat")
	a := dial(t, socket, "attach\nfresh\n")
	a.out.waitFor(t, "fresh\r\n", 2)
	a.send(t, "\x04")
	s.wait()
}

func TestCommandNotStarted(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	for _, tc := range []struct {
		cmd  *exec.Cmd
		code int
	}{
		{exec.Command("no-such-command-ctxterm"), 127},
		{exec.Command(filepath.Join(dir, "missing")), 127},
		{exec.Command(notExec), 126},
		// Found, but the kernel refuses the start for another reason
		// (E2BIG: one argument over MAX_ARG_STRLEN): 126 as well, never
		// the 1 of a console that could not be set up.
		{exec.Command("/bin/true", strings.Repeat("x", 256<<10)), 126},
	} {
		socket := filepath.Join(dir, "main.sock")
		events := filepath.Join(dir, "events.jsonl")
		code, err := Serve(Config{Cmd: tc.cmd, Socket: socket, Events: events})
		var se *SetupError
		if !errors.As(err, &se) || se.Code != tc.code || code != tc.code {
			t.Errorf("%v: code %d, err %v", tc.cmd.Args, code, err)
		}
		if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: socket left behind", tc.cmd.Args)
		}
		if _, err := os.Lstat(events); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: record left behind", tc.cmd.Args)
		}
	}
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
