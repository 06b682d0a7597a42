package mcpstdio

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// readFrameOrStop takes a frame of exactly MaxFrame bytes, and refuses one
// byte more as soon as that byte has arrived, while the writer is still
// there and no newline has come.
func TestReadFrameOrStopLimit(t *testing.T) {
	exact := strings.Repeat("a", MaxFrame)
	r := bufio.NewReaderSize(strings.NewReader(exact+"\n{}\n"), 64<<10)
	got, err := readFrameOrStop(r)
	if err != nil || len(got) != MaxFrame {
		t.Fatalf("exact frame: %d bytes, %v", len(got), err)
	}
	if got, err := readFrameOrStop(r); err != nil || string(got) != "{}" {
		t.Fatalf("next frame: %q %v", got, err)
	}
	if _, err := readFrameOrStop(r); err != io.EOF {
		t.Fatalf("end: %v, want EOF", err)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(exact + "b")) // and then nothing: the writer stays open
	done := make(chan error, 1)
	go func() {
		_, err := readFrameOrStop(bufio.NewReaderSize(pr, 64<<10))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("oversized: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("readFrameOrStop waited for a newline past the limit")
	}

	r = bufio.NewReader(strings.NewReader(`{"a":1}`))
	if _, err := readFrameOrStop(r); err != io.ErrUnexpectedEOF {
		t.Fatalf("unterminated last line: %v", err)
	}
}
