package broker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// seqpacketPair is a connected pair as the broker's sockets are.
func seqpacketPair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fds[0], fds[1]
}

// within fails the test unless done is closed within d.
func within(t *testing.T, d time.Duration, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
	}
}

// A peer that connects and never speaks holds a receive only until its
// deadline (the host's handshake bound); what it sends afterwards still
// arrives whole.
func TestRecvFileSilentPeerMeetsDeadline(t *testing.T) {
	ours, peer := seqpacketPair(t)
	defer unix.Close(peer)
	f := Pollable(ours, "test")
	defer f.Close()
	SetRecvDeadline(f, time.Now().Add(50*time.Millisecond))
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		var r Request
		_, err = RecvFile(f, &r, 3)
	}()
	within(t, 5*time.Second, done, "a receive from a silent peer")
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a silent peer's receive ended with %v, want the deadline", err)
	}
	SetRecvDeadline(f, time.Time{})
	if err := Send(peer, Request{Tool: "fs.read"}, nil); err != nil {
		t.Fatal(err)
	}
	var r Request
	if _, err := RecvFile(f, &r, 3); err != nil || r.Tool != "fs.read" {
		t.Fatalf("after the deadline: %+v, %v", r, err)
	}
}

// Closing a call's connection ends every wait on it at once, the wait
// for the caller's hangup among them, though the caller is still there
// and silent: a wait left blocked on a closed descriptor's number could
// read, once the number was reused, another caller's request.
func TestCloseEndsWaits(t *testing.T) {
	ours, peer := seqpacketPair(t)
	defer unix.Close(peer)
	f := Pollable(ours, "test")
	hungUp, received := make(chan struct{}), make(chan struct{})
	var err error
	go func() {
		defer close(hungUp)
		AwaitHangupFile(f)
	}()
	go func() {
		defer close(received)
		var r Request
		_, err = RecvFile(f, &r, 3)
	}()
	time.Sleep(20 * time.Millisecond) // both are waiting
	f.Close()
	within(t, 5*time.Second, hungUp, "the wait for a hangup after the connection was closed")
	within(t, 5*time.Second, received, "a receive after the connection was closed")
	if err != ErrClosed {
		t.Fatalf("a receive on a closed connection ended with %v, want ErrClosed", err)
	}
}

// A raw descriptor whose description was made pollable (the init's
// order channel, which the unix gate sends on by number) still blocks
// while the peer's queue is full instead of failing with EAGAIN, and
// every message arrives, in order; a raw receive there waits too.
func TestRawSendOnPollableDescriptionWaits(t *testing.T) {
	ours, peer := seqpacketPair(t)
	defer unix.Close(ours)
	defer unix.Close(peer)
	f, err := PollableDup(ours, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n = 200 // of 8 KiB: far more than a unix socket queues
	big := string(make([]byte, 8<<10))
	sent := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := Send(ours, InitReport{Op: OpExit, ID: uint64(i), Error: big}, nil); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	select {
	case err := <-sent:
		t.Fatalf("all %d sent to a peer that read none (%v): the queue never filled", n, err)
	case <-time.After(100 * time.Millisecond):
	}
	for i := 0; i < n; i++ {
		var o InitReport
		if _, err := Recv(peer, &o, 0); err != nil || o.ID != uint64(i) {
			t.Fatalf("message %d: %+v, %v", i, o, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("a raw send on a pollable description: %v", err)
	}
	// A raw receive there waits for the message as well.
	go func() {
		time.Sleep(50 * time.Millisecond)
		Send(peer, Order{Op: OpKill, ID: 7}, nil)
	}()
	var o Order
	if _, err := Recv(ours, &o, 0); err != nil || o.ID != 7 {
		t.Fatalf("a raw receive on a pollable description: %+v, %v", o, err)
	}
}

// A receive timeout on a blocking socket (SO_RCVTIMEO) still ends the
// receive: its EAGAIN is not waited through as a non-blocking one's is.
func TestRawRecvTimeoutStands(t *testing.T) {
	ours, peer := seqpacketPair(t)
	defer unix.Close(ours)
	defer unix.Close(peer)
	tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(ours, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		var o InitReport
		_, err = Recv(ours, &o, 0)
	}()
	within(t, 5*time.Second, done, "a receive with a timeout")
	if err != unix.EAGAIN {
		t.Fatalf("a timed-out receive ended with %v, want EAGAIN", err)
	}
}

// Closing the listener ends an Accept waiting on it (the run's end).
func TestListenerCloseEndsAccept(t *testing.T) {
	l, err := Listen(filepath.Join(t.TempDir(), SocketName))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err = l.Accept()
	}()
	time.Sleep(20 * time.Millisecond)
	l.Close()
	within(t, 5*time.Second, done, "an accept after the listener was closed")
	if err != ErrClosed {
		t.Fatalf("accept on a closed listener: %v, want ErrClosed", err)
	}
}
