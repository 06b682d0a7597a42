package ctx

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctx/applets/cli"
)

// TestLastLinesOffset: where the last n lines begin, a final line with or
// without its newline, files larger than one backward block.
func TestLastLinesOffset(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 70<<10)
	for _, tc := range []struct {
		data string
		n    int
		want string
	}{
		{"", 10, ""},
		{"a\nb\nc\n", 0, ""},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 10, "a\nb\nc\n"},
		{"a\nb\nc", 1, "c"},
		{"a\nb\nc", 2, "b\nc"},
		{"\n\n", 1, "\n"},
		{long + "\n" + long + "\nend\n", 2, long + "\nend\n"},
		{long + "\n" + long + "\nend\n", 3, long + "\n" + long + "\nend\n"},
	} {
		p := filepath.Join(dir, "audit")
		if err := os.WriteFile(p, []byte(tc.data), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		off, err := lastLinesOffset(f, tc.n)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.data[off:]; got != tc.want {
			t.Errorf("last %d of %d bytes: got %d bytes from %d, want %d", tc.n, len(tc.data), len(got), off, len(tc.want))
		}
	}
}

// TestParseRunOp: the three commands and their refusals (exit 2, one line).
func TestParseRunOp(t *testing.T) {
	good := []struct {
		cmd  []string
		want runOp
	}{
		{[]string{"tool", "fs.read", "a", "b"}, runOp{verb: "tool", tool: "fs.read", args: []string{"a", "b"}, lines: 10}},
		{[]string{"policy", "show"}, runOp{verb: "policy", lines: 10}},
		{[]string{"audit", "tail"}, runOp{verb: "audit", lines: 10}},
		{[]string{"audit", "tail", "-f", "-n", "0"}, runOp{verb: "audit", follow: true, lines: 0}},
	}
	for _, tc := range good {
		var stderr bytes.Buffer
		op, _, ok := parseRunOp(&cli.Env{Name: "ctx run", Stderr: &stderr}, tc.cmd)
		op.argv = nil
		if !ok || op.verb != tc.want.verb || op.tool != tc.want.tool || strings.Join(op.args, " ") != strings.Join(tc.want.args, " ") ||
			op.follow != tc.want.follow || op.lines != tc.want.lines {
			t.Errorf("%q: %+v %v %s", tc.cmd, op, ok, stderr.String())
		}
	}
	for _, cmd := range [][]string{nil, {"tool"}, {"tool", "../x"}, {"policy"}, {"policy", "list"}, {"audit"},
		{"audit", "tail", "-n"}, {"audit", "tail", "-n", "-1"}, {"audit", "tail", "-n", "07"}, {"audit", "tail", "-x"}, {"launch"}} {
		var stderr bytes.Buffer
		if _, code, ok := parseRunOp(&cli.Env{Name: "ctx run", Stderr: &stderr}, cmd); ok || code != cli.Usage || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: accepted or not one usage line (%d): %q", cmd, code, stderr.String())
		}
	}
}
