package ctx

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"ctx/applets/cli"
)

// TestSecretSetOnTerminal: on a terminal ctx secret set asks for the value
// with echo off, so the key typed never comes back to the screen (nor into
// a terminal's scrollback or a recording of it), and the file holds it.
func TestSecretSetOnTerminal(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	if code, _, errs := runIn(t, RunBootstrap, "--root", root); code != 0 {
		t.Fatalf("bootstrap: %s", errs)
	}
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	e, _, _ := cli.BufferEnv("", nil)
	errb := &lockedBuffer{}
	e.Name, e.Stdin, e.Stderr = "ctx secret set", tty, errb
	done := make(chan int, 1)
	go func() { done <- RunSecretSet(e, []string{"--root", root, "coder", "API_KEY"}) }()
	// The screen: whatever the terminal sends back while the key is
	// typed, until the terminal closes (EIO once the tty is closed).
	screen := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(master)
		screen <- b
	}()
	// Typed once the prompt is up, when the echo is off.
	for i := 0; i < 200 && !strings.Contains(errb.String(), "(not shown)"); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	io.WriteString(master, "sk-TYPED-on-terminal\n")
	select {
	case code := <-done:
		if code != cli.OK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ctx secret set did not return")
	}
	tty.Close()
	if got := <-screen; bytes.Contains(got, []byte("TYPED")) {
		t.Fatalf("the key was echoed: %q", got)
	}
	if !strings.Contains(errb.String(), "API_KEY for agent coder (not shown): ") || strings.Contains(errb.String(), "TYPED") {
		t.Fatalf("stderr %q", errb.String())
	}
	b, err := os.ReadFile(filepath.Join(root, "secret", "coder"))
	if err != nil || string(b) != "API_KEY=sk-TYPED-on-terminal\n" {
		t.Fatalf("file %q %v", b, err)
	}
}

// lockedBuffer is a bytes.Buffer written by the command and read by the
// test at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
