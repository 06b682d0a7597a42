package toolrun

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctx/applets/cli"
	"ctx/fsops/broker"
)

// lateCallerEnv makes the test binary a brokered caller that is a
// process of its own (TestLateSignalCaller).
const lateCallerEnv = "CTX_TEST_LATE_CALLER"

// TestLateSignalCaller is the caller's process of TestCallerSignalCancels:
// one call to the host at the socket lateCallerEnv names (with the
// signalGrace to use), as /mnt/tools/T makes it, exiting with its status.
func TestLateSignalCaller(t *testing.T) {
	path, grace, _ := strings.Cut(os.Getenv(lateCallerEnv), ",")
	if path == "" {
		return // run as a test: nothing to do
	}
	signalGrace, _ = time.ParseDuration(grace)
	conn, err := broker.Dial(path)
	if err != nil {
		os.Exit(cli.Unavailable)
	}
	e := &cli.Env{Name: "fs.read", Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Exits: true}
	os.Exit(callBroker(e, conn, broker.Request{Tool: "fs.read"}, []int{0, 1, 2}, &descriptorRelay{}, "the host", true))
}

// A signal to a caller that is a process of its own cancels its call
// whenever it comes: before signalGrace the caller dies of it, after it
// the caller ends its side of the connection and waits for the host's
// answer. Either way the host (here the test) sees the connection end,
// which is what cancels the call; and after the grace the caller's exit
// comes only after the host has answered.
func TestCallerSignalCancels(t *testing.T) {
	for _, tc := range []struct {
		name         string
		grace, after time.Duration
	}{{"early", time.Minute, 0}, {"late", time.Millisecond, 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			// broker.Listen, as the run host's: a TMPDIR too long for a
			// socket's name is bound through its pinned directory.
			path := filepath.Join(t.TempDir(), "broker.sock")
			l, err := broker.Listen(path)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			cmd := exec.Command(os.Args[0], "-test.run=^TestLateSignalCaller$")
			cmd.Env = append(os.Environ(), lateCallerEnv+"="+path+","+tc.grace.String())
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			c := acceptWithin(t, l, 10*time.Second)
			defer c.Close()
			buf := make([]byte, 1<<16)
			if n, err := c.Read(buf); err != nil || !strings.Contains(string(buf[:n]), `"fs.read"`) {
				t.Fatalf("the request: %q, %v", buf[:n], err)
			}
			time.Sleep(tc.after)
			cmd.Process.Signal(syscall.SIGTERM)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := c.Read(buf); n != 0 || (err != nil && !errors.Is(err, io.EOF)) {
				t.Fatalf("after the signal the host read %q, %v: the call is not cancelled", buf[:n], err)
			}
			if tc.after == 0 {
				err := <-exited
				var ee *exec.ExitError
				if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
					t.Fatalf("a signal within the grace: the caller ended with %v, want death by the signal", err)
				}
				return
			}
			select {
			case err := <-exited:
				t.Fatalf("the caller exited (%v) before the host answered its cancelled call", err)
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := c.Write([]byte(`{"exit":0}`)); err != nil {
				t.Fatal(err)
			}
			err = <-exited
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != cli.Signaled(syscall.SIGTERM) {
				t.Fatalf("a signal after the grace: the caller ended with %v, want exit %d", err, cli.Signaled(syscall.SIGTERM))
			}
		})
	}
}

// acceptWithin is the host's accept of one caller, as a net.Conn (for its
// deadlines), failing the test after d.
func acceptWithin(t *testing.T, l *broker.Listener, d time.Duration) net.Conn {
	t.Helper()
	type accepted struct {
		fd  int
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		fd, err := l.Accept()
		ch <- accepted{fd, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatal(a.err)
		}
		f := os.NewFile(uintptr(a.fd), "caller")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	case <-time.After(d):
		l.Close()
		t.Fatalf("no caller connected within %v", d)
	}
	return nil
}
