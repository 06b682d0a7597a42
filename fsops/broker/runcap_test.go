package broker

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestRunCapabilityRoundTrip: a message sent on the child end arrives at
// the host with the sender's pid, and the sender's wait ends on the host's
// acknowledgement; Serve returns once the last holder of the child end is
// gone.
func TestRunCapabilityRoundTrip(t *testing.T) {
	c, err := NewRunCapability()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type got struct {
		pid int
		msg string
	}
	ch := make(chan got, 1)
	done := make(chan struct{})
	go func() {
		c.Serve(1024, func(pid int, msg []byte, ack *os.File) {
			ch <- got{pid, string(msg)}
			Acknowledge(ack, true)
		})
		close(done)
	}()
	fd := int(c.Child.Fd())
	env := map[string]string{RunFDEnv: strconv.Itoa(fd)}
	n, ok := RunFDFromEnv(func(k string) string { return env[k] })
	if !ok || n != fd {
		t.Fatalf("RunFDFromEnv = %d, %v; want %d", n, ok, fd)
	}
	if !SendToRun(n, []byte("hello"), 10*time.Second) {
		t.Fatal("SendToRun failed")
	}
	if g := <-ch; g.pid != os.Getpid() || g.msg != "hello" {
		t.Fatalf("host got %+v, want pid %d and hello", g, os.Getpid())
	}
	c.CloseChild()
	<-done
}

// TestRunFDFromEnvRefuses: only a canonical number above stderr naming an
// open socket is a run capability.
func TestRunFDFromEnvRefuses(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "notsock")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, v := range []string{"", "x", "2", "-1", "0" + strconv.Itoa(int(f.Fd())), strconv.Itoa(int(f.Fd())), "65000"} {
		if n, ok := RunFDFromEnv(func(string) string { return v }); ok {
			t.Errorf("CTX_RUN_FD=%q accepted as %d", v, n)
		}
	}
}
