package proc

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
)

func TestCappedLines(t *testing.T) {
	var lines []string
	b := &Capped{Limit: 12, OnLine: func(l []byte) { lines = append(lines, string(l)) }}
	for _, p := range []string{"ab", "c\nde", "\n\nfghij", "klmnop\n"} {
		if n, err := b.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	// Lines as they complete; what is past the limit is never seen.
	if strings.Join(lines, "|") != "abc|de|" {
		t.Fatalf("lines %q", lines)
	}
	if string(b.Bytes()) != "abc\nde\n\nfghi" || b.Dropped() != 8 || !b.Truncated() {
		t.Fatalf("kept %q, dropped %d", b.Bytes(), b.Dropped())
	}
}

// io.Copy must not bypass the limit (no ReadFrom), and a buffer filled
// exactly is not truncated.
func TestCappedCopy(t *testing.T) {
	b := &Capped{Limit: 4}
	if n, err := io.Copy(b, strings.NewReader("1234")); n != 4 || err != nil || b.Truncated() {
		t.Fatalf("copy %d %v truncated %v", n, err, b.Truncated())
	}
	if n, err := io.Copy(b, bytes.NewReader([]byte("56"))); n != 2 || err != nil || string(b.Bytes()) != "1234" || b.Dropped() != 2 {
		t.Fatalf("copy %d %v kept %q dropped %d", n, err, b.Bytes(), b.Dropped())
	}
}

// With StopOver a child writing past the limit gets EPIPE: the copy stops
// instead of draining it.
func TestCappedStopOver(t *testing.T) {
	b := &Capped{Limit: 3, StopOver: true}
	if n, err := b.Write([]byte("12345")); n != 3 || err == nil {
		t.Fatalf("Write = %d, %v; want 3 and an error", n, err)
	}
	out := &Capped{Limit: 10, StopOver: true}
	cmd := exec.Command("/bin/sh", "-c", `trap '' PIPE; yes | head -c 100000; echo "status $?" >&2`)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	tree, err := StartTree(cmd)
	if err != nil {
		t.Fatal(err)
	}
	_ = tree.Wait()
	if len(out.Bytes()) != 10 || !out.Truncated() {
		t.Fatalf("kept %q", out.Bytes())
	}
	if strings.Contains(stderr.String(), "status 0") {
		t.Fatalf("the writer was drained to its end: %s", stderr.String())
	}
}
