package fsops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBrokerLongSocketPath: a run directory deeper than sun_path holds (a
// deep root's landlock run) still gets its broker, bound and dialed through
// a descriptor of the directory.
func TestBrokerLongSocketPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, BrokerSocketName)
	if len(path) <= maxSocketPath {
		t.Fatalf("path of %d bytes is not long enough for the test", len(path))
	}
	l, err := ListenBroker(path)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer unix.Close(l)
	if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no socket at the long path: %v", err)
	}
	c, err := DialBroker(path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer unix.Close(c)
	if err := SendBrokerMessage(c, BrokerReply{Exit: 7}, nil); err != nil {
		t.Fatal(err)
	}
	a, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(a)
	var got BrokerReply
	if _, err := RecvBrokerMessage(a, &got, 0); err != nil || got.Exit != 7 {
		t.Fatalf("received %+v, %v", got, err)
	}
}
