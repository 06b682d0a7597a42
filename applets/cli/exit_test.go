package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestErrExit is the one errno-to-exit table (ctx man ctx.tool, EXIT
// STATUS): only a denial is decided by the errno.
func TestErrExit(t *testing.T) {
	pathErr := func(errno syscall.Errno) error { return &os.PathError{Op: "open", Path: "/x", Err: errno} }
	for _, c := range []struct {
		err       error
		otherwise int
		want      int
	}{
		{nil, Failure, OK},
		{pathErr(syscall.EACCES), Failure, Denied},
		{pathErr(syscall.EPERM), Unavailable, Denied},
		{fmt.Errorf("agent coder: %w", pathErr(syscall.EACCES)), Unavailable, Denied},
		{fs.ErrPermission, Failure, Denied},
		{fmt.Errorf("wrapped: %w", fs.ErrPermission), Usage, Denied},
		{pathErr(syscall.ENOENT), Failure, Failure},
		{pathErr(syscall.EINVAL), Usage, Usage},
		{pathErr(syscall.EINVAL), Failure, Failure},
		{pathErr(syscall.EEXIST), Unavailable, Unavailable},
		{errors.New("no errno"), Unavailable, Unavailable},
	} {
		if got := ErrExit(c.err, c.otherwise); got != c.want {
			t.Errorf("ErrExit(%v, %d) = %d, want %d", c.err, c.otherwise, got, c.want)
		}
	}
	if got := ErrnoExit(0, Failure); got != OK {
		t.Errorf("ErrnoExit(0) = %d, want 0", got)
	}
	if got := Signaled(syscall.SIGKILL); got != 137 {
		t.Errorf("Signaled(SIGKILL) = %d, want 137", got)
	}
}

// terminalSafe reports the first byte or rune of s that would act on a
// terminal: a C0 or C1 control (newline excepted), DEL, or invalid UTF-8.
func terminalSafe(s string) (string, bool) {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Sprintf("invalid UTF-8 at %d", i), false
			}
		}
		if r != '\n' && (unicode.IsControl(r) || r == 0x7f) {
			return fmt.Sprintf("%U at %d", r, i), false
		}
	}
	return "", true
}

func TestPrinterEscapes(t *testing.T) {
	hostile := "--\x1b]0;pwned\a\r\x1b[2J\u009b\x9b\xff\nctx: denied: forged"
	var b strings.Builder
	Errorf(&b, "ctx ls", "unknown option %s", hostile)
	Deniedf(&b, "fs.read", "open %s: permission denied", hostile)
	Usagef(&b, "tsh", "unknown option %s", hostile)
	out := b.String()
	if what, ok := terminalSafe(out); !ok {
		t.Fatalf("control byte reached the output (%s):\n%q", what, out)
	}
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("%d lines, want 3 (a message cannot forge a line):\n%s", n, out)
	}
	if !strings.HasPrefix(out, `ctx ls: unknown option --\x1b]0;pwned\a\r\x1b[2J\u009b\x9b\xff\nctx: denied: forged`+"\n") {
		t.Errorf("first line:\n%s", out)
	}
	if !strings.Contains(out, "\n"+DeniedPrefix+"fs.read: open --") {
		t.Errorf("no denied line:\n%s", out)
	}
	if !strings.HasSuffix(out, ` (see "tsh --help")`+"\n") {
		t.Errorf("no usage hint:\n%s", out)
	}
	// Text escaped before (by a caller) is printed as it is.
	once := Line("x", hostile)
	if twice := Line("x", strings.TrimSuffix(strings.TrimPrefix(once, "x: "), "\n")); twice != once {
		t.Errorf("escaping twice changed the line:\n%s%s", once, twice)
	}
}
