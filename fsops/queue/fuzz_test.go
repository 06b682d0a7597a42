package queue

import (
	"ctx/fsops"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseLease: the lease parser never panics, accepts only leases whose
// every field is valid, and what it accepts survives Marshal unchanged.
func FuzzParseLease(f *testing.F) {
	f.Add([]byte(`{"worker":"w1","host":"box/pid:[4026531836]","pid":4242,"pid_start":918273,"claimed_at":"2026-06-22T12:00:00.123456789Z"}` + "\n"))
	f.Add([]byte(`{"worker":"w1","host":"h","pid":1,"pid_start":0,"claimed_at":"2026-06-22T12:00:00Z","x":1}`))
	f.Add([]byte(`{"worker":"w1","worker":"w2","host":"h","pid":1,"pid_start":0,"claimed_at":"2026-06-22T12:00:00Z"}`))
	f.Add([]byte(`{"worker":null,"host":"h","pid":1,"pid_start":0,"claimed_at":"2026-06-22T12:00:00Z"}`))
	f.Add([]byte(`{"worker":"w","host":"h h","pid":1e3,"pid_start":-1,"claimed_at":"yesterday"} {}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLease(b)
		if err != nil {
			return
		}
		if ValidWorkerName(l.Worker) != nil || validHost(l.Host) != nil || l.PID < 1 || l.PID > maxPID {
			t.Fatalf("accepted invalid lease %+v from %q", l, b)
		}
		again, err := ParseLease(l.Marshal())
		if err != nil || again != l {
			t.Fatalf("round trip of %+v: %+v, %v", l, again, err)
		}
	})
}

// FuzzLeaseMarshal: Marshal, which encodes plain leases by hand, writes
// exactly what encoding/json writes, whatever the strings hold.
func FuzzLeaseMarshal(f *testing.F) {
	f.Add("w1", "box/pid:[4026531836]", 4242, uint64(918273), "2026-06-22T12:00:00.123456789Z")
	f.Add("a<b&c>", "h\"x\\y", -1, uint64(0), "\x01\u2028\xff")
	f.Add("", "", 0, uint64(1<<63), "é")
	f.Fuzz(func(t *testing.T, worker, host string, pid int, start uint64, at string) {
		l := Lease{Worker: worker, Host: host, PID: pid, PIDStart: start, ClaimedAt: at}
		want, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Marshal(); string(got) != string(want)+"\n" {
			t.Fatalf("Marshal(%+v) = %q, want %q", l, got, string(want)+"\n")
		}
	})
}

// FuzzJobName: a valid job name is a short object name ending in .req.json
// that can never be mistaken for a temporary, a result or a path; and a
// temporary name is never a job.
func FuzzJobName(f *testing.F) {
	for _, s := range []string{"a.req.json", ".req.json", "x.req.json.result", ".a.req.json.tmp-12-0123456789ab",
		"../x.req.json", "a/b.req.json", strings.Repeat("a", 56) + ".req.json", "20260622T120000.123456789Z-0a1b2c3d.req.json"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, _, ok := parseTempName(s); ok && ValidJobName(s) == nil {
			t.Fatalf("%q is both a temporary and a job", s)
		}
		if ValidJobName(s) != nil {
			return
		}
		if !strings.HasSuffix(s, JobSuffix) || len(s) > 64 || strings.ContainsAny(s, "/\x00") || s[0] == '.' || s == ".." {
			t.Fatalf("accepted %q", s)
		}
		if j, ok := jobOfResult(resultName(s)); !ok || j != s {
			t.Fatalf("result of %q maps back to %q", s, j)
		}
		if ValidJobName(resultName(s)) == nil {
			t.Fatalf("result name of %q is a job name", s)
		}
		target, _, ok := parseTempName(fsops.TempBase(s))
		if !ok || target != s {
			t.Fatalf("temporary of %q parses as %q %v", s, target, ok)
		}
	})
}
