package ptyterm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseModeLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		mode Mode
		used int
		err  error
	}{
		{"watch\n", Watch, 6, nil},
		{"attach\n", Attach, 7, nil},
		{"attach\n\x1b]ctxterm;", Attach, 7, nil},
		{"", 0, 0, errModeIncomplete},
		{"w", 0, 0, errModeIncomplete},
		{"watch", 0, 0, errModeIncomplete},
		{"atta", 0, 0, errModeIncomplete},
		{"watch\r\n", 0, 0, errBadMode},
		{"Watch\n", 0, 0, errBadMode},
		{" watch\n", 0, 0, errBadMode},
		{"watchx", 0, 0, errBadMode},
		{"emit\n", 0, 0, errBadMode},
		{"\n", 0, 0, errBadMode},
	} {
		m, used, err := parseModeLine([]byte(tc.in))
		if m != tc.mode || used != tc.used || err != tc.err {
			t.Errorf("%q: %v %d %v, want %v %d %v", tc.in, m, used, err, tc.mode, tc.used, tc.err)
		}
	}
}

func TestReadModeLine(t *testing.T) {
	// One byte per read, and input behind the line is kept.
	m, rest, err := readModeLine(iotest.OneByteReader(strings.NewReader("attach\n")))
	if m != Attach || len(rest) != 0 || err != nil {
		t.Fatalf("%v %q %v", m, rest, err)
	}
	m, rest, err = readModeLine(strings.NewReader("attach\nls\n"))
	if m != Attach || string(rest) != "ls\n" || err != nil {
		t.Fatalf("%v %q %v", m, rest, err)
	}
	if _, _, err := readModeLine(strings.NewReader("wat")); err != io.ErrUnexpectedEOF {
		t.Fatalf("short: %v", err)
	}
	// A bad first byte is refused without waiting for more.
	if _, _, err := readModeLine(iotest.OneByteReader(strings.NewReader("x"))); err != errBadMode {
		t.Fatalf("bad: %v", err)
	}
}

func filterAll(chunks ...string) (string, []Winsize) {
	var f winsizeFilter
	var out []byte
	var all []Winsize
	for _, c := range chunks {
		var sizes []Winsize
		out, sizes = f.Filter(out, []byte(c))
		all = append(all, sizes...)
	}
	return string(f.Release(out)), all
}

func TestWinsizeFilter(t *testing.T) {
	ws := func(r, c uint16) []Winsize { return []Winsize{{r, c}} }
	for _, tc := range []struct {
		name  string
		in    []string
		out   string
		sizes []Winsize
	}{
		{"plain", []string{"ls -l\r"}, "ls -l\r", nil},
		{"winsize BEL", []string{"a\x1b]ctxterm;winsize;24;80\ab"}, "ab", ws(24, 80)},
		{"winsize ST", []string{"\x1b]ctxterm;winsize;1;65535\x1b\\"}, "", ws(1, 65535)},
		{"split everywhere", strings.Split("x\x1b]ctxterm;winsize;40;120\ay", ""), "xy", ws(40, 120)},
		{"two", []string{"\x1b]ctxterm;winsize;1;2\a\x1b]ctxterm;winsize;3;4\a"}, "", []Winsize{{1, 2}, {3, 4}}},
		{"arrow key", []string{"\x1b[A"}, "\x1b[A", nil},
		{"alt-x", []string{"\x1bx"}, "\x1bx", nil},
		{"title OSC passes", []string{"\x1b]0;title\a"}, "\x1b]0;title\a", nil},
		{"near marker", []string{"\x1b]ctxtern;winsize;1;1\a"}, "\x1b]ctxtern;winsize;1;1\a", nil},
		{"ESC ESC", []string{"\x1b\x1b]ctxterm;winsize;5;6\a"}, "\x1b", ws(5, 6)},
		{"lone ESC at end", []string{"abc\x1b"}, "abc\x1b", nil},
		{"marker prefix at end", []string{"\x1b]ctx"}, "\x1b]ctx", nil},
		{"zero rows dropped", []string{"\x1b]ctxterm;winsize;0;80\aok"}, "ok", nil},
		{"too big dropped", []string{"\x1b]ctxterm;winsize;65536;80\aok"}, "ok", nil},
		{"six digits dropped", []string{"\x1b]ctxterm;winsize;000024;80\aok"}, "ok", nil},
		{"sign dropped", []string{"\x1b]ctxterm;winsize;+24;80\aok"}, "ok", nil},
		{"unknown command dropped", []string{"\x1b]ctxterm;title;x\aok"}, "ok", nil},
		{"missing cols dropped", []string{"\x1b]ctxterm;winsize;24\aok"}, "ok", nil},
		{"extra field dropped", []string{"\x1b]ctxterm;winsize;24;80;1\aok"}, "ok", nil},
		{"broken ST", []string{"\x1b]ctxterm;winsize;24;80\x1bxok"}, "\x1bxok", nil},
		{"broken ST starts a marker", []string{"\x1b]ctxterm;win\x1b]ctxterm;winsize;7;8\a"}, "", ws(7, 8)},
		{"overlong body then input", []string{"\x1b]ctxterm;" + strings.Repeat("9", maxOSCBody) + "tail"}, "tail", nil},
		{"body held at end", []string{"\x1b]ctxterm;winsize;2"}, "", nil},
	} {
		out, sizes := filterAll(tc.in...)
		if out != tc.out || !equalSizes(sizes, tc.sizes) {
			t.Errorf("%s: got %q %v, want %q %v", tc.name, out, sizes, tc.out, tc.sizes)
		}
	}
}

func equalSizes(a, b []Winsize) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWinsizeSequenceRoundTrip(t *testing.T) {
	for _, ws := range []Winsize{{1, 1}, {24, 80}, {65535, 65535}} {
		if _, sizes := filterAll(string(WinsizeSequence(ws))); !equalSizes(sizes, []Winsize{ws}) {
			t.Errorf("%v: %v", ws, sizes)
		}
	}
}

func TestDetachFilter(t *testing.T) {
	for _, tc := range []struct {
		in     []string
		out    string
		detach bool
	}{
		{[]string{"~."}, "", true},
		{[]string{"ls\r~."}, "ls\r", true},
		{[]string{"ls\n~.rest"}, "ls\n", true},
		{[]string{"ls\r~", "."}, "ls\r", true},
		{[]string{"a~."}, "a~.", false},
		{[]string{"~~."}, "~.", false},
		{[]string{"~~", "~."}, "~~.", false},
		{[]string{"~x"}, "~x", false},
		{[]string{"~\r~."}, "~\r", true},
		{[]string{"\x03~."}, "\x03~.", false},
	} {
		d := newDetachFilter()
		var out []byte
		detached := false
		for _, c := range tc.in {
			var dst []byte
			dst, detached = d.Filter(nil, []byte(c))
			out = append(out, dst...)
			if detached {
				break
			}
		}
		if string(out) != tc.out || detached != tc.detach {
			t.Errorf("%q: got %q %v, want %q %v", tc.in, out, detached, tc.out, tc.detach)
		}
	}
}

func TestRefusalState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want refusalShape
	}{
		{"", refusalMaybe},
		{"ctx", refusalMaybe},
		{"ctxterm: busy", refusalMaybe},
		{"ctxterm: busy: x\n", refusalComplete},
		{"ctxterm: busy: x\nmore", refusalNo},
		{"$ ", refusalNo},
		{"ctxtern", refusalNo},
		{"ctxterm: " + strings.Repeat("x", maxRefusal), refusalNo},
	} {
		if got := refusalState([]byte(tc.in)); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestScrollback(t *testing.T) {
	s := newScrollback(8)
	s.Write([]byte("abc"))
	if got := string(s.Snapshot()); got != "abc" {
		t.Fatal(got)
	}
	s.Write([]byte("defgh"))
	if got := string(s.Snapshot()); got != "abcdefgh" {
		t.Fatal(got)
	}
	s.Write([]byte("ij"))
	if got := string(s.Snapshot()); got != "cdefghij" {
		t.Fatal(got)
	}
	s.Write([]byte("0123456789"))
	if got := string(s.Snapshot()); got != "23456789" {
		t.Fatal(got)
	}
	// A wrapped ring does not begin with half a character.
	s.Write([]byte("x\u00e9\u20acyz")) // x é(2) €(3) y z = 8 bytes
	s.Write([]byte("w"))               // drops "x": begins at é
	if got := string(s.Snapshot()); got != "\u00e9\u20acyzw" {
		t.Fatalf("%q", got)
	}
	s.Write([]byte("v")) // drops the first byte of é
	if got := string(s.Snapshot()); got != "\u20acyzwv" {
		t.Fatalf("%q", got)
	}
	// Compare with a plain byte slice over many small writes.
	r := newScrollback(100)
	var all []byte
	for i := 0; i < 1000; i++ {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, i%37)
		r.Write(p)
		all = append(all, p...)
		want := all[max(0, len(all)-100):]
		if got := r.Snapshot(); !bytes.Equal(got, want) {
			t.Fatalf("after %d writes: %q, want %q", i, got, want)
		}
	}
}

func TestLastSeqAndReplayErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	// A long record: the tail alone decides the last seq.
	var b bytes.Buffer
	for i := 1; i <= 2000; i++ {
		b.WriteString(`{"seq":` + strconv.Itoa(i) + `,"ts":"2026-01-01T00:00:00.000Z","type":"pty.output","data_b64":"eA=="}` + "\n")
	}
	b.WriteString(`{"seq":2001,"ts":"2026-01-01T00:00:00.000Z","type":"process.exit","exit_code":9}` + "\n")
	b.WriteString(`{"seq":20`) // cut short
	os.WriteFile(path, b.Bytes(), 0o644)
	rec, err := openRecorder(path, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.seq != 2001 {
		t.Fatalf("last seq %d", rec.seq)
	}
	rec.FlushOutput()
	rec.Close()
	var out bytes.Buffer
	if err := Replay(path, &out); err != nil || out.String() != strings.Repeat("x", 2000) {
		t.Fatalf("replay: %v, %d bytes", err, out.Len())
	}
	if code, found, err := ReadExit(path); code != 9 || !found || err != nil {
		t.Fatalf("ReadExit %d %v %v", code, found, err)
	}

	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"seq":1,"type":"pty.output","data_b64":"eA=="}`+"\n"+`{"seq":2,"type":"pty.output","data_b64":"!!"}`+"\n"), 0o644)
	if err := Replay(bad, io.Discard); err == nil || !strings.HasPrefix(err.Error(), bad+":2: data_b64") {
		t.Fatalf("bad base64: %v", err)
	}
	os.WriteFile(bad, []byte("{\"seq\":1}\nnot json\n"), 0o644)
	if err := Replay(bad, io.Discard); err == nil || !strings.HasPrefix(err.Error(), bad+":2: ") {
		t.Fatalf("bad json: %v", err)
	}
	if _, found, err := ReadExit(filepath.Join(dir, "none")); found || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing record: %v %v", found, err)
	}
	// A record without an exit yet.
	os.WriteFile(bad, []byte(`{"seq":1,"type":"process.start","pid":3}`+"\n"), 0o644)
	if _, found, err := ReadExit(bad); found || err != nil {
		t.Fatalf("running: %v %v", found, err)
	}
}
