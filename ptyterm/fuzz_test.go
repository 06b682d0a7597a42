package ptyterm

import (
	"bytes"
	"testing"
)

// FuzzWinsizeFilter checks the in-band parser on arbitrary input cut at an
// arbitrary point: the split never changes the result, input without ESC
// passes unchanged, nothing is added, and every size reported is in range.
func FuzzWinsizeFilter(f *testing.F) {
	f.Add([]byte("\x1b]ctxterm;winsize;24;80\a"), 5)
	f.Add([]byte("ls\r\x1b[A\x1b]0;t\a\x1b]ctxterm;winsize;1;2\x1b\\"), 12)
	f.Add([]byte("\x1b\x1b]ctxterm;x\x1bq"), 1)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		var whole winsizeFilter
		out1, sizes1 := whole.Filter(nil, in)
		out1 = whole.Release(out1)

		if cut < 0 {
			cut = -cut
		}
		if len(in) > 0 {
			cut %= len(in) + 1
		} else {
			cut = 0
		}
		var split winsizeFilter
		out2, s1 := split.Filter(nil, in[:cut])
		out2, s2 := split.Filter(out2, in[cut:])
		out2 = split.Release(out2)
		sizes2 := append(s1, s2...)

		if !bytes.Equal(out1, out2) || !equalSizes(sizes1, sizes2) {
			t.Fatalf("split at %d changes the result: %q %v vs %q %v", cut, out1, sizes1, out2, sizes2)
		}
		if bytes.IndexByte(in, 0x1b) < 0 && !bytes.Equal(out1, in) {
			t.Fatalf("input without ESC changed: %q -> %q", in, out1)
		}
		// (The output may still contain the marker's bytes: "ESC ] ESC ]
		// ctxterm; BEL ctxterm;" passes "ESC ]" and "ctxterm;", ordinary
		// input that only looks like a marker once the sequence between is
		// gone.)
		if len(out1) > len(in) {
			t.Fatalf("output longer than input")
		}
		for _, ws := range sizes1 {
			if ws.Rows == 0 || ws.Cols == 0 {
				t.Fatalf("zero size accepted: %v", ws)
			}
		}
	})
}

// FuzzModeLine checks that only the two exact lines are accepted, that
// the rest is returned intact, and that a decision never needs more than
// maxModeLine bytes.
func FuzzModeLine(f *testing.F) {
	f.Add([]byte("watch\n"))
	f.Add([]byte("attach\nls\n"))
	f.Add([]byte("watch\r\n"))
	f.Add([]byte("emit\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, used, err := parseModeLine(in)
		switch err {
		case nil:
			if line := m.String() + "\n"; string(in[:used]) != line {
				t.Fatalf("accepted %q as %v", in[:used], m)
			}
			mode, rest, rerr := readModeLine(bytes.NewReader(in))
			if rerr != nil || mode != m || !bytes.Equal(rest, in[used:min(len(in), maxModeLine)]) {
				t.Fatalf("readModeLine(%q) = %v %q %v", in, mode, rest, rerr)
			}
		case errModeIncomplete:
			if len(in) >= len("attach\n") {
				t.Fatalf("%q undecided", in)
			}
			if !bytes.HasPrefix([]byte("watch\n"), in) && !bytes.HasPrefix([]byte("attach\n"), in) {
				t.Fatalf("%q is no prefix of a mode line", in)
			}
		case errBadMode:
			if bytes.HasPrefix(in, []byte("watch\n")) || bytes.HasPrefix(in, []byte("attach\n")) {
				t.Fatalf("refused %q", in)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}

// FuzzDetachFilter checks that the filter only ever removes the bytes of
// the detach sequence: without a detach, the output equals the input with
// each "~~" at a line start reduced to "~"; a held "~" is the only thing
// ever kept back.
func FuzzDetachFilter(f *testing.F) {
	f.Add([]byte("ls\r~."))
	f.Add([]byte("~~x\n~y"))
	f.Fuzz(func(t *testing.T, in []byte) {
		d := newDetachFilter()
		out, detached := d.Filter(nil, in)
		if detached {
			if !bytes.Contains(in, []byte("~.")) {
				t.Fatalf("detached without ~. in %q", in)
			}
			return
		}
		if d.tilde {
			out = append(out, '~')
		}
		if len(out) > len(in) || bytes.Count(out, []byte{'~'}) > bytes.Count(in, []byte{'~'}) {
			t.Fatalf("%q -> %q", in, out)
		}
		stripped := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte{'~'}, nil) }
		if !bytes.Equal(stripped(out), stripped(in)) {
			t.Fatalf("non-tilde bytes changed: %q -> %q", in, out)
		}
	})
}
