package runhost

import (
	"strings"
	"testing"
	"unicode/utf8"

	"ctx/fsops/broker"
)

// TestSanitizeReport: what a tool reports for its call is kept only as
// far as it is valid: an errno the kernel names, a layer of ctx's, a
// detail of valid UTF-8 within 512 bytes (its control characters are the
// encoder's to escape). An invented errno or layer, or an overlong one,
// is dropped.
func TestSanitizeReport(t *testing.T) {
	long := strings.Repeat("é", 400) + "\u202e"
	for _, tc := range []struct {
		in, want broker.Report
	}{
		{broker.Report{Errno: "ENOENT", Layer: "hook", Detail: "d"}, broker.Report{Errno: "ENOENT", Layer: "hook", Detail: "d"}},
		{broker.Report{Errno: "EFORGED", Layer: "forged\u0085layer"}, broker.Report{}},
		{broker.Report{Errno: "ENOENT" + strings.Repeat(" ", 40), Layer: "agent-policy\u202e"}, broker.Report{}},
		{broker.Report{Layer: "tool-trust", Detail: "bad \xff byte"}, broker.Report{Layer: "tool-trust", Detail: "bad \uFFFD byte"}},
	} {
		if got := sanitizeReport(tc.in); got != tc.want {
			t.Errorf("sanitizeReport(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
	got := sanitizeReport(broker.Report{Detail: long})
	if len(got.Detail) > maxReportDetail || !utf8.ValidString(got.Detail) || !strings.HasPrefix(long, got.Detail) {
		t.Errorf("a long detail kept as %d bytes, valid %v", len(got.Detail), utf8.ValidString(got.Detail))
	}
}
