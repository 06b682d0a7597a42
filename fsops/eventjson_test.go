package fsops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"unicode/utf8"
)

// eventStrings are field values that exercise every escape Marshal makes.
var eventStrings = []string{
	"", "ok", "tool.call", `quote " backslash \ slash /`, "<script>&amp;</script>",
	"\x00\x01\b\f\n\r\t\x1f\x7f", "é ü 中文 🙂", "\u2028\u2029", "\xff\xfe bad \xc3", "\xe2\x80",
	"a\u2027b\u202ac", "\u009b2J\u0085 \u202eevil\u202c \u2066x\u2069 \u200e\u200f\u061c \x9b\x9d",
}

// marshalEscaped is encoding/json's Marshal of ev with the display
// controls escaped as AppendJSONString escapes them: the same JSON value.
func marshalEscaped(ev Event) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, r := range string(b) {
		if displayControl(r) {
			out = fmt.Appendf(out, "\\u%04x", r)
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	return out, nil
}

func randomEvent(r *rand.Rand) Event {
	s := func() string {
		if r.Intn(3) == 0 {
			b := make([]byte, r.Intn(12))
			r.Read(b)
			return string(b)
		}
		return eventStrings[r.Intn(len(eventStrings))]
	}
	ev := Event{TS: s(), Type: s(), Agent: s(), Session: s(), Object: s(), Status: s(),
		Run: s(), Errno: s(), Layer: s(), Worker: s(), Detail: s(), PID: r.Intn(3) * r.Intn(1<<20)}
	if r.Intn(2) == 0 {
		x := r.Intn(512) - 256
		ev.Exit = &x
	}
	if r.Intn(2) == 0 {
		x := r.Intn(70000)
		ev.UID = &x
	}
	durs := []float64{0, 1, 0.001, 12.345, 1e-7, 1.5e-9, 3e21, 1e21, 999999999999999999999, -2.5, 1e-6, 123456789.123, math.SmallestNonzeroFloat64}
	ev.DurMS = durs[r.Intn(len(durs))]
	if r.Intn(4) == 0 {
		ev.DurMS = r.NormFloat64() * math.Pow(10, float64(r.Intn(40)-20))
	}
	return ev
}

// TestEventJSONMatchesMarshal holds the hand encoder to encoding/json's
// Marshal, byte for byte, on random events and every escape, with the
// display controls escaped as well (marshalEscaped).
func TestEventJSONMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		ev := randomEvent(r)
		want, err := marshalEscaped(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := ev.appendJSON(nil)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("event %+v:\n got %s\nwant %s", ev, got, want)
		}
	}
	// Line, which shortens long events, is unchanged too.
	long := Event{TS: "t", Type: "x", Detail: string(bytes.Repeat([]byte("<é>"), 3000)), Object: string(bytes.Repeat([]byte{'o'}, 2500))}
	line := long.Line()
	if len(line) >= maxEventLine+1 || !json.Valid(line) {
		t.Fatalf("long event: %d bytes, valid %v", len(line), json.Valid(line))
	}
}

// FuzzEventJSON compares the hand encoder with Marshal on any strings.
func FuzzEventJSON(f *testing.F) {
	for _, s := range eventStrings {
		f.Add(s, 1.5)
	}
	f.Fuzz(func(t *testing.T, s string, dur float64) {
		ev := Event{TS: s, Type: s, Detail: s, Worker: s, DurMS: dur}
		want, err := marshalEscaped(ev)
		got, ok := ev.appendJSON(nil)
		if (err == nil) != ok || (ok && !bytes.Equal(got, want)) {
			t.Fatalf("%q %v:\n got %s (%v)\nwant %s (%v)", s, dur, got, ok, want, err)
		}
		if ok {
			var back Event
			if err := json.Unmarshal(got, &back); err != nil || back.Detail != string([]rune(s)) {
				t.Fatalf("%q does not read back: %q %v", s, back.Detail, err)
			}
			if hasDisplayControl(got) {
				t.Fatalf("%q: a display control left raw: %q", s, got)
			}
		}
	})
}

func hasDisplayControl(b []byte) bool {
	for _, r := range string(b) {
		if displayControl(r) || r < 0x20 {
			return true
		}
	}
	return false
}

// TestEventJSONEscapesDisplayControls: a hostile agent's detail with C1
// controls, a raw 8-bit CSI and bidi overrides is one JSON line with no
// such rune raw, and reads back as what was given (invalid UTF-8 as
// U+FFFD).
func TestEventJSONEscapesDisplayControls(t *testing.T) {
	hostile := "x\u009b2J\u009d0;pwn\u0007\u202etxt.exe\u2066\u200f\x9b31m\x1b]52;c;aGk=\x07"
	line := Event{TS: "t", Type: "tool.call", Object: hostile, Detail: hostile}.Line()
	if hasDisplayControl(bytes.TrimSuffix(line, []byte("\n"))) {
		t.Fatalf("raw control in the event line: %q", line)
	}
	for _, esc := range []string{`\u009b`, `\u009d`, `\u202e`, `\u2066`, `\u200f`, `\ufffd`, `\u001b`, `\u0007`} {
		if !bytes.Contains(line, []byte(esc)) {
			t.Errorf("no %s in %s", esc, line)
		}
	}
	var back Event
	if err := json.Unmarshal(line, &back); err != nil {
		t.Fatal(err)
	}
	if want := string([]rune(hostile)); back.Detail != want || back.Object != want {
		t.Errorf("read back %q, want %q", back.Detail, want)
	}
}
