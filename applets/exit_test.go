package applets

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unicode"
	"unicode/utf8"

	"ctx/applets/cli"
	"ctx/applets/ctx"
	"ctx/applets/toolrun"
	"ctx/fsops/object"
	"ctx/fsops/queue"
	"ctx/manual"
)

// TestExitTableMatchesManual: the EXIT STATUS blocks of ctx man ctx and
// ctx man ctx.tool list the codes of package cli and no other.
func TestExitTableMatchesManual(t *testing.T) {
	known := map[int]string{cli.OK: "OK", cli.Failure: "Failure", cli.Usage: "Usage", cli.Denied: "Denied",
		cli.Unavailable: "Unavailable", cli.Internal: "Internal", cli.TempFail: "TempFail",
		cli.NotExec: "NotExec", cli.NotFound: "NotFound"}
	line := regexp.MustCompile(`(?m)^(\d+)(\+N)?\s`)
	for _, page := range []string{"ctx.md", "ctx.tool.md"} {
		b, ok := manual.Read(page)
		if !ok {
			t.Fatalf("no manual page %s", page)
		}
		_, rest, _ := strings.Cut(string(b), "## EXIT STATUS\n\n```\n")
		block, _, ok := strings.Cut(rest, "```")
		if !ok {
			t.Fatalf("%s: no EXIT STATUS block", page)
		}
		seen := map[int]bool{}
		for _, m := range line.FindAllStringSubmatch(block, -1) {
			n, _ := strconv.Atoi(m[1])
			if m[2] != "" {
				if n != 128 || cli.Signaled(syscall.SIGKILL) != 128+9 {
					t.Errorf("%s: %s+N is not cli.Signaled", page, m[1])
				}
				continue
			}
			if _, ok := known[n]; !ok {
				t.Errorf("%s documents exit %d, which package cli does not have", page, n)
			}
			seen[n] = true
		}
		for n, name := range known {
			if !seen[n] && !(page == "ctx.tool.md" && n == cli.TempFail) {
				t.Errorf("%s does not document exit %d (cli.%s)", page, n, name)
			}
		}
	}
}

// TestOneErrnoMapping: every place that turns an error into an exit status
// agrees on the one mapping (cli.ErrExit): EACCES and EPERM are 13, other
// errnos keep the place's own failure status.
func TestOneErrnoMapping(t *testing.T) {
	denied := &os.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}
	missing := &os.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}
	if got := toolrun.FsErr(denied).Exit; got != cli.Denied {
		t.Errorf("tool: EACCES exits %d, want 13", got)
	}
	if got := toolrun.FsErr(missing).Exit; got != cli.Failure {
		t.Errorf("tool: ENOENT exits %d, want 1", got)
	}
	if got := ctx.QueueExit(fmt.Errorf("queue: %w", denied)); got != cli.Denied {
		t.Errorf("queue: EACCES exits %d, want 13", got)
	}
	if got := ctx.QueueExit(queue.ErrEmpty); got != cli.TempFail {
		t.Errorf("queue: empty exits %d, want 75", got)
	}
	if got := ctx.QueueExit(missing); got != cli.Failure {
		t.Errorf("queue: ENOENT exits %d, want 1", got)
	}
	e, _, _ := cli.BufferEnv("", nil)
	if got := ctx.ObjectFail(e, &object.Error{Kind: object.Unavailable, Msg: "open class directory", Err: denied}); got != cli.Denied {
		t.Errorf("object: EACCES exits %d, want 13", got)
	}
	if got := ctx.ObjectFail(e, &object.Error{Kind: object.Unavailable, Msg: "open class directory", Err: missing}); got != cli.Unavailable {
		t.Errorf("object: ENOENT exits %d, want 69", got)
	}
	if got := ctx.ObjectFail(e, &object.Error{Kind: object.Invalid, Msg: "bad manifest"}); got != cli.Usage {
		t.Errorf("object: invalid exits %d, want 2", got)
	}
}

// terminalUnsafe names the first rune of s that would act on a terminal: a
// C0 or C1 control other than newline, DEL, or a byte of invalid UTF-8.
func terminalUnsafe(s string) string {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Sprintf("invalid UTF-8 at byte %d", i)
			}
		}
		if r != '\n' && (unicode.IsControl(r) || r == 0x7f) {
			return fmt.Sprintf("%U at byte %d", r, i)
		}
	}
	return ""
}

// TestErrorOutputEscaped feeds terminal control bytes (an OSC retitle, a
// screen clear, a carriage return, a C1 CSI, invalid UTF-8) through the
// error paths of many applets and commands: every one fails with a message
// on standard error, and none of the bytes reaches it.
func TestErrorOutputEscaped(t *testing.T) {
	const evil = "\x1b]0;pwned\a\x1b[2J\r\u009b\xff"
	root := t.TempDir()
	if code := dispatch(&cli.Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{},
		Getenv: func(string) string { return "" }}, "ctx", []string{"shared", "new", "--root", root, "proj"}); code != 0 {
		t.Fatalf("ctx shared new: exit %d", code)
	}
	cases := []struct {
		name string // applet
		args []string
	}{
		{"ctx", []string{"ls", "--" + evil}},
		{"ctx", []string{"ls", "--root", root, "agent/" + evil}},
		{"ctx", []string{"cat", "--" + evil}},
		{"ctx", []string{"cat", "--root", root, "agent/" + evil}},
		{"ctx", []string{"set", "--root", root, evil + "/log", "v"}},
		{"ctx", []string{"set", "--root", root, "agent/" + evil + ".d/policy", "v"}},
		{"ctx", []string{"set", "--" + evil, "a", "b"}},
		{"ctx", []string{"policy", evil}},
		{"ctx", []string{"policy", "check", filepath.Join(root, evil)}},
		{"ctx", []string{"policy", "explain", "--root", root, evil, "tool:fs.read", "execute"}},
		{"ctx", []string{"policy", "explain", "--root", root, "coder", "tool:" + evil, "execute"}},
		{"ctx", []string{"object", evil}},
		{"ctx", []string{"object", "check", filepath.Join(root, evil+".json")}},
		{"ctx", []string{"object", "install", "--tier", evil, "m.json"}},
		{"ctx", []string{"object", "inspect", "--root", root, "tool", evil}},
		{"ctx", []string{"queue", evil}},
		{"ctx", []string{"queue", "publish", "--root", root, evil}},
		{"ctx", []string{"queue", "claim", "--root", root, "proj", "--worker", evil}},
		{"ctx", []string{"queue", "exec", "--root", root, "proj", "--worker", "w", "--", "/nonexistent/" + evil}},
		{"ctx", []string{"queue", "finish", "--root", root, "proj", evil, "--status", "done"}},
		{"ctx", []string{"queue", "publish", "--root", root, "proj", filepath.Join(root, evil)}},
		{"ctx", []string{"shared", "new", "--root", root, evil}},
		{"ctx", []string{"agent", "status", "--root", root, evil}},
		{"ctx", []string{"run", "--root", root, evil, "--", "policy", "show"}},
		{"ctx", []string{"which", evil}},
		{"ctx", []string{"man", evil}},
		{"ctx", []string{"tool", evil}},
		{"ctx", []string{"validate-name", evil}},
		{"ctx", []string{evil}},
		{evil, nil},
		{"tsh", []string{"--" + evil}},
		{"fs.read", []string{filepath.Join(root, evil)}},
		{"fs.list", []string{filepath.Join(root, evil)}},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		e := &cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		code := dispatch(e, c.name, c.args)
		label := strconv.Quote(strings.Join(append([]string{c.name}, c.args...), " "))
		if code == cli.OK || errb.Len() == 0 {
			t.Errorf("%s: exit %d, stderr %q: want a failure with a message", label, code, errb.String())
			continue
		}
		if bad := terminalUnsafe(errb.String()); bad != "" {
			t.Errorf("%s: %s reached standard error:\n%q", label, bad, errb.String())
		}
		if bad := terminalUnsafe(out.String()); bad != "" {
			t.Errorf("%s: %s reached standard output:\n%q", label, bad, out.String())
		}
	}
}
