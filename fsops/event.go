package fsops

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"ctx/policy"
)

// Event is one line of an event stream (events.jsonl, .d/log). The first six
// fields are the seed's minimum shape and are always present; the rest are
// optional facts. Events hold facts and errors only: never file contents,
// prompt bodies or secrets.
type Event struct {
	TS      string `json:"ts"`
	Type    string `json:"type"`
	Agent   string `json:"agent"`
	Session string `json:"session"`
	Object  string `json:"object"`
	Status  string `json:"status"`

	Run    string  `json:"run,omitempty"`
	Errno  string  `json:"errno,omitempty"`
	Layer  string  `json:"layer,omitempty"`
	Exit   *int    `json:"exit,omitempty"`
	DurMS  float64 `json:"dur_ms,omitempty"`
	UID    *int    `json:"uid,omitempty"`
	PID    int     `json:"pid,omitempty"`
	Worker string  `json:"worker,omitempty"`
	Detail string  `json:"detail,omitempty"`
}

// maxEventLine keeps one event within a single atomic O_APPEND write that
// readers can never see interleaved with another writer's line.
const maxEventLine = 4000

// Timestamp formats t the way events record time: UTC, milliseconds, Z.
func Timestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// Line encodes ev as one JSON line ending in a newline, filling TS when empty.
// A line that would exceed the append limit is shortened, Detail first, then
// whichever field is longest, each cut in half (at a UTF-8 boundary) and
// marked with "…", until it fits: every field of an event is bounded, and
// the loop ends on any input because each round makes a field shorter.
func (ev Event) Line() []byte {
	if ev.TS == "" {
		ev.TS = Timestamp(time.Now())
	}
	for {
		b, ok := ev.appendJSON(make([]byte, 0, 256))
		if !ok {
			b, _ = json.Marshal(ev)
		}
		if len(b) < maxEventLine {
			return append(b, '\n')
		}
		field := &ev.Detail
		if len(ev.Detail) < 64 {
			for _, f := range []*string{&ev.Type, &ev.Agent, &ev.Session, &ev.Object, &ev.Status, &ev.Run, &ev.Errno, &ev.Layer, &ev.Worker, &ev.TS, &ev.Detail} {
				if len(*f) > len(*field) {
					field = f
				}
			}
		}
		if len(*field) == 0 {
			return append(b, '\n') // nothing left to cut (cannot happen: the fixed part is small)
		}
		*field = halve(*field)
	}
}

// halve returns the first half of s, cut at a UTF-8 boundary, marked "…"
// when that keeps it shorter than s.
func halve(s string) string {
	n := len(s) / 2
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n+len("…") < len(s) {
		return s[:n] + "…"
	}
	return s[:n]
}

// NewRunID returns a run id: "ctx-" and 32 lowercase hex digits from 128
// random bits.
func NewRunID() string {
	var b [16]byte
	if err := RandomBytes(b[:]); err != nil {
		panic("ctx: no system entropy: " + err.Error())
	}
	return "ctx-" + hex.EncodeToString(b[:])
}

// IsRunID reports whether s has the form NewRunID gives.
func IsRunID(s string) bool {
	hexPart, ok := strings.CutPrefix(s, "ctx-")
	return ok && policy.IsLowerHex(hexPart, 32)
}
