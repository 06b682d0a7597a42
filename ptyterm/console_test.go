package ptyterm

import (
	"strings"
	"testing"
)

// TestNoConsoleLeavesOutputAlone is a background terminal given a console
// output anyway (the run host passes its standard streams whatever the
// mode): the program's output reaches the record and the watchers, never
// that output.
func TestNoConsoleLeavesOutputAlone(t *testing.T) {
	out := newSyncBuffer()
	s := serve(t, Config{Console: ConsoleNone, ConsoleIn: strings.NewReader("typed\n"), ConsoleOut: out},
		"sh", "-c", "read x; echo marker-$x")
	w := dial(t, s.socket, "watch\n")
	// Joined before the attacher's line makes the output: the server
	// serves each connection on its own, in no set order.
	waitEvent(t, s.events, EventWatch, nil)
	a := dial(t, s.socket, "attach\n")
	a.send(t, "from-attacher\n")
	w.out.waitFor(t, "marker-from-attacher", 1)
	if code := s.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := out.String(); got != "" {
		t.Fatalf("the console output of a terminal without a console got %q", got)
	}
	if !strings.Contains(string(replayed(t, s.events)), "marker-from-attacher") {
		t.Fatal("the record lacks the program's output")
	}
}
