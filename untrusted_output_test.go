package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/creack/pty"
)

// hostileName is what a hostile agent names a directory to attack the
// person who later reads a listing, a policy or an audit line: a
// clipboard write (OSC 52), a window title (OSC 0, OSC 2), clear screen,
// an 8-bit CSI raw (0x9B) and as a code point (U+009B), C1 NEL and a
// right-to-left override.
const hostileName = "n\x1b]52;c;cm0gLXJmIH4K\a\x1b]0;pwned\a\x1b]2;t\x1b\\\x1b[2J\x9b31m\u009b2J\u0085\u202egpj.exe"

// rawControl reports the first byte or rune of out a terminal would act
// on: a C0 control but newline, tab and CR, DEL, ESC, a C1 control as a
// code point or as a raw byte (invalid UTF-8), or a bidi control.
func rawControl(out []byte, allowESC bool) (int, bool) {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRune(out[i:])
		switch {
		case r == utf8.RuneError && n == 1,
			r == 0x1b && !allowESC,
			r < 0x20 && r != '\n' && r != '\t' && r != '\r' && r != 0x1b, r == 0x7f,
			r >= 0x80 && r <= 0x9f, r == 0x061c, r == 0x200e, r == 0x200f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return i, true
		}
		i += n
	}
	return 0, false
}

// TestHostileNamesReachNoTerminal attacks first: the agent's workspace
// holds directories with hostileName (a .git in one, so the run's policy
// names it), the run starts in one (its audit names it), the agent
// leaves such a name in its home, and prints clipboard, title and device
// control strings among colored output. Then it checks what a person
// sees: ctx run policy show, audit tail, ctx ls, agent status and ps,
// and ctx agent watch on a real terminal carry no raw control; colors
// pass watch unchanged; the events still parse as JSON and hold the
// escaped forms.
func TestHostileNamesReachNoTerminal(t *testing.T) {
	root, ws := newAgentTree(t, "untrusted-")
	cwd := filepath.Join(ws, hostileName)
	if err := os.MkdirAll(filepath.Join(cwd, hostileName, ".git"), 0o777); err != nil {
		t.Fatal(err)
	}
	exec.Command("chmod", "-R", "a+rwx", ws).Run()
	script := `printf '\033[1;31mred\033[0m plain\n'; ` +
		`printf 'A\033]52;c;cm0gLXJmIH4K\007B\033]0;pwned\033\\C\033P+q544e\033\\D\302\2352;t\302\234E\235t\007F\n'; ` +
		`echo ready; read x`
	start := ctxCmd(root, "start", "coder", "--no-console", "--", "sh", "-c", script)
	start.Dir = cwd
	var startOut syncBuffer
	start.Stdout, start.Stderr = &startOut, &startOut
	if err := start.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- start.Wait() }()
	t.Cleanup(func() { start.Process.Kill() })
	uid := strings.TrimSpace(string(mustRead(os.ReadFile(filepath.Join(root, "agent", "coder.d", "uid")))))
	events := filepath.Join(root, "home", uid, "agent", "coder", "session", "default", "events.jsonl")
	seen := streams("ctx agent start", &startOut, "events", fileText(events))
	waitFor(t, "the run to be ready", seen, func() bool {
		st, _ := ctxCmd(root, "status", "coder").Output()
		return bytes.HasPrefix(st, []byte("ready"))
	})

	// ctx agent watch on a real terminal: the strings are gone, colors
	// and text pass; --raw relays them (the attack does reach a watcher
	// that asks for it).
	watch := func(args ...string) string {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		w := ctxCmd(root, append([]string{"watch", "coder"}, args...)...)
		w.Stdin, w.Stdout, w.Stderr = tty, tty, tty
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		var screen syncBuffer
		go io.Copy(&screen, ptmx)
		waitFor(t, "the watcher to see the scrollback", streams("watch", &screen), func() bool { return strings.Contains(screen.String(), "ready") })
		w.Process.Kill()
		w.Wait()
		return screen.String()
	}
	filtered := watch()
	if !strings.Contains(filtered, "\x1b[1;31mred\x1b[0m plain") || !strings.Contains(filtered, "ABCDEF") {
		t.Errorf("watch changed normal output: %q", filtered)
	}
	for _, bad := range []string{"\x1b]", "\x1bP", "\u009d", "\x9d", "pwned", "cm0g"} {
		if strings.Contains(filtered, bad) {
			t.Errorf("watch relayed %q: %q", bad, filtered)
		}
	}
	if raw := watch("--raw"); !strings.Contains(raw, "\x1b]52;c;cm0gLXJmIH4K") {
		t.Errorf("watch --raw did not relay the output as it is: %q", raw)
	}

	// A name the agent left in its home, listed by its owner.
	home := filepath.Join(root, "home", uid, "agent", "coder")
	os.MkdirAll(filepath.Join(home, hostileName), 0o755)
	for _, c := range []struct {
		what string
		args []string
	}{
		{"policy show", []string{"run", "coder", "--", "policy", "show"}},
		{"audit tail", []string{"run", "coder", "--", "audit", "tail", "-n", "50"}},
		{"ls", []string{"ls", "home/" + uid + "/agent/coder"}},
		{"agent status", []string{"agent", "status", "coder"}},
		{"agent ps", []string{"agent", "ps"}},
	} {
		cmd := exec.Command(filepath.Join(binDir, "ctx"), c.args...)
		cmd.Env = append(os.Environ(), "CTX_ROOT="+root)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%q", c.what, err, out)
			continue
		}
		if i, bad := rawControl(out, false); bad {
			t.Errorf("%s: a raw control at %d reached the person:\n%q", c.what, i, out)
		}
		if !strings.HasPrefix(c.what, "agent") && !bytes.Contains(out, []byte(`\x1b]52;c;cm0gLXJmIH4K\a`)) && !bytes.Contains(out, []byte(`\u001b]52;c;cm0gLXJmIH4K\u0007`)) {
			t.Errorf("%s: the hostile name is not shown escaped:\n%q", c.what, out)
		}
	}

	// The events stay faithful JSON: every line parses, the name reads
	// back whole, and no C1 or bidi control is in the file raw.
	b := mustRead(os.ReadFile(events))
	found := false
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var ev map[string]any
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("event line does not parse: %v\n%q", err, line)
		}
		if d, _ := ev["detail"].(string); strings.Contains(d, strings.ToValidUTF8(hostileName, "\ufffd")) || strings.Contains(d, string([]rune(hostileName))) {
			found = true
		}
	}
	if !found {
		t.Errorf("no event names the run's workspace:\n%s", b)
	}
	if i, bad := rawControl(b, false); bad {
		t.Errorf("a raw control in the events at %d: %q", i, b[max(0, i-40):min(len(b), i+40)])
	}
	if !bytes.Contains(b, []byte(`\u202e`)) || !bytes.Contains(b, []byte(`\u009b`)) {
		t.Errorf("the events lack the escaped forms:\n%s", b)
	}
	ctxCmd(root, "stop", "coder").Run()
	waitDone(t, "the run to end", done, start.Process, seen)
}

func mustRead(v []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return v
}
