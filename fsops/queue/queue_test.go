package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

func TestLifecycle(t *testing.T) {
	root, q := newQueue(t, "")
	job, err := q.Publish("", requestBytes("x"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\d{8}T\d{6}\.\d{9}Z-[0-9a-f]{8}\.req\.json$`).MatchString(job) {
		t.Fatalf("generated name %q", job)
	}
	mustFile(t, qpath(root, "pending", job), requestBytes("x"))
	mustState(t, q, job, StatePending)

	got, lease, err := q.Claim(Owner{Worker: "w1"})
	if err != nil || got != job {
		t.Fatalf("claim = %q, %v", got, err)
	}
	mustState(t, q, job, StateClaimed)
	mustFile(t, qpath(root, "claimed", job, job), requestBytes("x"))
	lb, err := os.ReadFile(qpath(root, "lease", job, "worker"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseLease(lb)
	if err != nil || l != lease || l.PID != os.Getpid() || l.Worker != "w1" {
		t.Fatalf("lease %+v, %v; want %+v", l, err, lease)
	}
	if h, why := l.HolderState(); h != HolderAlive {
		t.Fatalf("own lease judged %s: %s", h, why)
	}
	req, err := q.ReadRequest(job)
	if err != nil || !bytes.Equal(req, requestBytes("x")) {
		t.Fatalf("ReadRequest = %q, %v", req, err)
	}

	path, err := q.Finish(job, Done, []byte("ok\n"), FinishOptions{Worker: "w1"})
	if err != nil || path != qpath(root, "done", job) {
		t.Fatalf("finish = %q, %v", path, err)
	}
	mustState(t, q, job, StateDone)
	mustFile(t, qpath(root, "done", job+".result"), []byte("ok\n"))
	for _, gone := range []string{qpath(root, "claimed", job), qpath(root, "lease", job)} {
		if _, err := os.Lstat(gone); !os.IsNotExist(err) {
			t.Fatalf("%s left behind: %v", gone, err)
		}
	}
	// Modes as documented, whatever the umask.
	for p, want := range map[string]os.FileMode{
		qpath(root, "done", job):           0o640,
		qpath(root, "done", job+".result"): 0o640,
		qpath(root, "pending"):             0o770 | os.ModeSetgid | os.ModeDir,
		qpath(root, LogName):               0o660,
	} {
		st, err := os.Lstat(p)
		if err != nil || st.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, st.Mode(), err, want)
		}
	}
	// The event log has one claim and one finish line.
	log, _ := os.ReadFile(qpath(root, LogName))
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s", log)
	}
	for i, typ := range []string{"queue.claim", "queue.finish"} {
		var ev map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &ev); err != nil {
			t.Fatal(err)
		}
		if ev["type"] != typ || ev["object"] != "shared/proj/queue/"+job || ev["worker"] != "w1" {
			t.Fatalf("event %d: %s", i, lines[i])
		}
	}
	if _, _, err := q.Claim(Owner{Worker: "w1"}); !errors.Is(err, ErrEmpty) {
		t.Fatalf("claim on empty queue: %v", err)
	}
	if r, err := q.Scan(); err != nil || len(r.Incomplete()) > 0 || len(r.Temps) > 0 || r.States[job] != StateDone {
		t.Fatalf("scan: %+v %v", r, err)
	}
}

func TestCreateSpace(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ctx")
	os.Mkdir(root, 0o755)
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	dir, created, err := CreateSpace(root, "proj")
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(root, "shared", "proj") || len(created) != 2+len(SpaceDirs)+1 {
		t.Fatalf("dir %s created %v", dir, created)
	}
	for _, rel := range append([]string{"."}, SpaceDirs...) {
		st, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil || st.Mode() != os.ModeDir|os.ModeSetgid|0o770 {
			t.Errorf("%s: %v %v", rel, st.Mode(), err)
		}
	}
	if st, _ := os.Lstat(filepath.Join(root, "shared")); st.Mode() != os.ModeDir|0o755 {
		t.Errorf("shared/: %v", st.Mode())
	}
	// Idempotent, and it keeps what exists as it is.
	os.Chmod(filepath.Join(dir, "data"), 0o700)
	if _, created, err = CreateSpace(root, "proj"); err != nil || len(created) != 0 {
		t.Fatalf("second run: %v %v", created, err)
	}
	if st, _ := os.Lstat(filepath.Join(dir, "data")); st.Mode().Perm() != 0o700 {
		t.Errorf("existing mode changed: %v", st.Mode())
	}
	for _, bad := range []string{"cortexfs-docs", ".x", "a/b", ""} {
		if _, _, err := CreateSpace(root, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("space %q: %v", bad, err)
		}
	}
}

func TestClaimOrderAndEmpty(t *testing.T) {
	_, q := newQueue(t, "")
	base := time.Date(2026, 6, 22, 12, 0, 0, 0, time.UTC)
	var want []string
	for i := 5; i >= 0; i-- { // published newest first
		name := GenerateName(base.Add(time.Duration(i) * time.Millisecond))
		want = append([]string{name}, want...)
		mustPublish(t, q, name)
	}
	// A second handle claims through its own listing; the two interleave
	// and together take every job once, oldest first.
	q2, err := Open(filepath.Dir(filepath.Dir(filepath.Dir(q.Dir))), "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	var got []string
	for i := 0; ; i++ {
		h := q
		if i%2 == 1 {
			h = q2
		}
		job, _, err := h.Claim(Owner{Worker: "w"})
		if errors.Is(err, ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, job)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("claim order\n got %v\nwant %v", got, want)
	}
}

func TestPublishRefusesExistingEvidence(t *testing.T) {
	root, q := newQueue(t, "")
	mustPublish(t, q, "a.req.json")
	if _, err := q.Publish("a.req.json", []byte(`{"other":1}`)); !errors.Is(err, ErrConflict) {
		t.Fatalf("republish: %v", err)
	}
	mustFile(t, qpath(root, "pending", "a.req.json"), requestBytes("a.req.json"))
	// A leftover claim directory or a terminal request also blocks the name.
	os.Mkdir(qpath(root, "claimed", "b.req.json"), 0o770)
	os.WriteFile(qpath(root, "done", "c.req.json"), []byte("r"), 0o640)
	for _, j := range []string{"b.req.json", "c.req.json"} {
		if _, err := q.Publish(j, []byte(`{}`)); !errors.Is(err, ErrConflict) {
			t.Fatalf("publish %s: %v", j, err)
		}
		if _, err := os.Lstat(qpath(root, "pending", j)); !os.IsNotExist(err) {
			t.Fatalf("%s published anyway", j)
		}
	}
	for _, c := range []struct {
		name string
		data string
	}{
		{"x.json", `{}`}, {".x.req.json", `{}`}, {"x.req.json", `{`}, {"x.req.json", strings.Repeat(" ", MaxRequest+1)},
	} {
		if _, err := q.Publish(c.name, []byte(c.data)); !errors.Is(err, ErrInvalid) {
			t.Errorf("publish %q: %v", c.name, err)
		}
	}
	r, _ := q.Scan()
	if len(r.Temps) > 0 {
		t.Fatalf("temporaries left: %v", r.Temps)
	}
	// An orphan result (only hand edits make one) does not block
	// publishing, and the later finish cannot overwrite it.
	orphan := qpath(root, "failed", "d.req.json.result")
	os.WriteFile(orphan, []byte("orphan"), 0o640)
	mustPublish(t, q, "d.req.json")
	os.Remove(qpath(root, "pending", "a.req.json"))
	if j, _, err := q.Claim(Owner{Worker: "w"}); err != nil || j != "d.req.json" {
		t.Fatal(j, err)
	}
	if _, err := q.Finish("d.req.json", Failed, []byte("mine"), FinishOptions{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("finish over orphan result: %v", err)
	}
	mustFile(t, orphan, []byte("orphan"))
	mustState(t, q, "d.req.json", StateInterruptedFinish)
}

// TestFinishRefusals runs on the test's temporary directory and on tmpfs,
// where Finish reads an empty state directory from its size instead of
// looking up each name (emptyDir): a name planted there must stop it the
// same way.
func TestFinishRefusals(t *testing.T) {
	t.Run("tempdir", func(t *testing.T) { testFinishRefusals(t, t.TempDir()) })
	t.Run("tmpfs", func(t *testing.T) {
		base := fastDir(t)
		var sfs unix.Statfs_t
		if unix.Statfs(base, &sfs) != nil || sfs.Type != unix.TMPFS_MAGIC {
			t.Skipf("no tmpfs here (%s is not one): emptyDir's size check is not used", base)
		}
		testFinishRefusals(t, base)
	})
}

func testFinishRefusals(t *testing.T, base string) {
	root, q := newQueue(t, base)
	if _, err := q.Finish("nope.req.json", Done, nil, FinishOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("finish absent: %v", err)
	}
	mustPublish(t, q, "a.req.json")
	if _, err := q.Finish("a.req.json", Done, nil, FinishOptions{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("finish pending: %v", err)
	}
	if _, _, err := q.Claim(Owner{Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Finish("a.req.json", Done, nil, FinishOptions{Worker: "w2"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("finish by another worker: %v", err)
	}
	if _, err := q.Finish("a.req.json", "maybe", nil, FinishOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad status: %v", err)
	}
	// A result planted before finish is never overwritten.
	planted := qpath(root, "done", "a.req.json.result")
	os.WriteFile(planted, []byte("planted"), 0o640)
	if _, err := q.Finish("a.req.json", Done, []byte("mine"), FinishOptions{}); err == nil {
		t.Fatal("finish over a planted result succeeded")
	}
	mustFile(t, planted, []byte("planted"))
	mustState(t, q, "a.req.json", StateInterruptedFinish)
	os.Remove(planted)
	// A result in the other terminal directory blocks too.
	other := qpath(root, "failed", "a.req.json.result")
	os.WriteFile(other, []byte("other"), 0o640)
	if _, err := q.Finish("a.req.json", Done, []byte("mine"), FinishOptions{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("finish with failed result present: %v", err)
	}
	mustFile(t, other, []byte("other"))
	os.Remove(other)
	mustState(t, q, "a.req.json", StateClaimed)
	if _, err := q.Finish("a.req.json", Failed, resultBytes("a.req.json"), FinishOptions{}); err != nil {
		t.Fatal(err)
	}
	mustState(t, q, "a.req.json", StateFailed)
	if _, err := q.Finish("a.req.json", Done, nil, FinishOptions{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("second finish: %v", err)
	}
	mustFile(t, qpath(root, "failed", "a.req.json.result"), resultBytes("a.req.json"))
}

func TestRecoverHolderRules(t *testing.T) {
	root, q := newQueue(t, "")
	mustPublish(t, q, "a.req.json")
	if _, _, err := q.Claim(Owner{Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	// The holder (this process) is alive: refused, nothing changes.
	if _, err := q.Recover("a.req.json", false); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "alive") {
		t.Fatalf("recover live claim: %v", err)
	}
	mustState(t, q, "a.req.json", StateClaimed)
	rec, err := q.Recover("a.req.json", true)
	if err != nil || rec.From != StateClaimed || rec.To != StatePending {
		t.Fatalf("forced recover: %+v %v", rec, err)
	}
	mustState(t, q, "a.req.json", StatePending)

	// A holder that has exited is provably gone.
	sleeper := exec.Command("/bin/sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Claim(Owner{Worker: "w1", PID: sleeper.Process.Pid}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Recover("a.req.json", false); !errors.Is(err, ErrConflict) {
		t.Fatalf("recover while sleeper runs: %v", err)
	}
	sleeper.Process.Kill()
	sleeper.Wait()
	if rec, err := q.Recover("a.req.json", false); err != nil || rec.To != StatePending {
		t.Fatalf("recover after holder exit: %+v %v", rec, err)
	}
	audit(t, root, q)

	// A reused pid (same pid, other start time), another host, and an
	// unreadable lease.
	l := Lease{Worker: "w", PID: os.Getpid(), PIDStart: 1, ClaimedAt: "2026-01-01T00:00:00Z"}
	l.Host, _ = hostID()
	if h, why := l.HolderState(); h != HolderGone || !strings.Contains(why, "another process") {
		t.Fatalf("reused pid: %s %s", h, why)
	}
	l.Host = "elsewhere/pid:[1]"
	if h, _ := l.HolderState(); h != HolderUnknown {
		t.Fatalf("foreign host: %s", h)
	}
	l.Host, _ = hostID()
	l.PID = deadPID(t)
	if h, _ := l.HolderState(); h != HolderGone {
		t.Fatalf("dead pid: %s", h)
	}
	if _, _, err := q.Claim(Owner{Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(qpath(root, "lease", "a.req.json", "worker"), []byte("garbage"), 0o640)
	if _, err := q.Recover("a.req.json", false); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("recover with unreadable lease: %v", err)
	}
	if _, err := q.Recover("a.req.json", true); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Recover("a.req.json", false); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "nothing to recover") {
		t.Fatalf("recover pending job: %v", err)
	}
	if _, err := q.Recover("zz.req.json", false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("recover absent job: %v", err)
	}
}

// TestClaimUndoesWithoutLease: when lease/J appears between the claim move
// and the lease (here planted at that very step), the claim puts the
// request back in pending/ and leaves the foreign lease/J untouched.
func TestClaimUndoesWithoutLease(t *testing.T) {
	root, q := newQueue(t, "")
	mustPublish(t, q, "a.req.json")
	planted := qpath(root, "lease", "a.req.json")
	stepHook = func(s string) {
		if s == "claim.synced" {
			os.Mkdir(planted, 0o700)
			os.WriteFile(filepath.Join(planted, "worker"), []byte("foreign"), 0o600)
		}
	}
	defer func() { stepHook = nil }()
	if _, _, err := q.Claim(Owner{Worker: "w"}); !errors.Is(err, ErrEmpty) {
		t.Fatalf("claim: %v", err)
	}
	mustFile(t, qpath(root, "pending", "a.req.json"), requestBytes("a.req.json"))
	mustFile(t, filepath.Join(planted, "worker"), []byte("foreign"))
	if _, err := os.Lstat(qpath(root, "claimed", "a.req.json")); !os.IsNotExist(err) {
		t.Fatalf("claimed/a.req.json left: %v", err)
	}
	mustState(t, q, "a.req.json", StateResidue)
}

// TestFinishActsOnItsOwnClaim: a worker whose claim was taken away
// (recover --force by an operator, then another worker's claim of the same
// job) cannot finish the other worker's claim.
func TestFinishActsOnItsOwnClaim(t *testing.T) {
	root, q := newQueue(t, "")
	q2, err := Open(root, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	mustPublish(t, q, "a.req.json")
	if _, _, err := q.Claim(Owner{Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q2.Recover("a.req.json", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q2.Claim(Owner{Worker: "w2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Finish("a.req.json", Done, []byte("w1"), FinishOptions{}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("stale finish: %v", err)
	}
	mustState(t, q, "a.req.json", StateClaimed)
	if _, err := q2.Finish("a.req.json", Done, resultBytes("a.req.json"), FinishOptions{Worker: "w2"}); err != nil {
		t.Fatal(err)
	}
	audit(t, root, q)
}

func TestClassify(t *testing.T) {
	type E = Evidence
	lease := func(e E) E { e.LeaseDir, e.Lease = true, true; return e }
	claim := func(e E) E { e.ClaimDir, e.Claimed = true, true; return e }
	cases := []struct {
		ev   E
		want State
	}{
		{E{}, StateAbsent},
		{E{Pending: true}, StatePending},
		{lease(claim(E{})), StateClaimed},
		{E{Done: true, DoneResult: true}, StateDone},
		{E{Failed: true, FailedResult: true}, StateFailed},
		{E{Pending: true, ClaimDir: true}, StateResidue},
		{lease(E{Pending: true}), StateResidue},
		{lease(E{Done: true, DoneResult: true, ClaimDir: true}), StateResidue},
		{E{Failed: true, FailedResult: true, LeaseDir: true}, StateResidue},
		{claim(E{}), StateUnleasedClaim},
		{claim(E{LeaseDir: true}), StateUnleasedClaim},
		{lease(claim(E{DoneResult: true})), StateInterruptedFinish},
		{lease(claim(E{FailedResult: true})), StateInterruptedFinish},
		{claim(E{DoneResult: true}), StateConflict},
		{lease(claim(E{Pending: true})), StateConflict},
		{E{Pending: true, Done: true, DoneResult: true}, StateConflict},
		{E{Done: true}, StateConflict},
		{E{Done: true, FailedResult: true}, StateConflict},
		{E{Failed: true, FailedResult: true, DoneResult: true}, StateConflict},
		{E{Pending: true, DoneResult: true}, StateConflict},
		{lease(claim(E{Foreign: []string{"lease/j/x"}})), StateConflict},
		{E{DoneResult: true}, StateOrphan},
		{lease(E{}), StateOrphan},
		{E{ClaimDir: true}, StateOrphan},
	}
	for _, c := range cases {
		c.ev.Job = "j.req.json"
		if got, why := Classify(&c.ev); got != c.want {
			t.Errorf("%v: %s (%s), want %s", c.ev.Paths(), got, why, c.want)
		}
	}
}

func TestIngest(t *testing.T) {
	root, q := newQueue(t, "")
	in := func(name string) string { return qpath(root, "inbox", name) }
	os.WriteFile(in("good.req.json"), []byte(`{"a":1}`), 0o600)
	os.WriteFile(in(".writing.req.json"), []byte(`{`), 0o600) // producer temp: untouched
	os.WriteFile(in("bad.json"), []byte(`{}`), 0o600)
	os.WriteFile(in("notjson.req.json"), []byte(`{`), 0o600)
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret bytes"), 0o600)
	os.Symlink(outside, in("link.req.json"))
	os.Link(outside, in("hard.req.json"))
	unix.Mkfifo(in("fifo.req.json"), 0o600)
	mustPublish(t, q, "dup.req.json")
	os.WriteFile(in("dup.req.json"), []byte(`{"dup":true}`), 0o600)

	published, skipped, err := q.Ingest()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(published, ",") != "good.req.json" {
		t.Fatalf("published %v", published)
	}
	reasons := map[string]string{}
	for _, s := range skipped {
		reasons[s.Name] = s.Reason
	}
	want := map[string]string{
		"bad.json": "not a job name", "notjson.req.json": "not valid JSON",
		"link.req.json": "symlink", "hard.req.json": "2 hard links",
		"fifo.req.json": "fifo", "dup.req.json": "already pending",
	}
	for name, frag := range want {
		if !strings.Contains(reasons[name], frag) {
			t.Errorf("%s: reason %q, want it to mention %q", name, reasons[name], frag)
		}
	}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v", skipped)
	}
	mustFile(t, qpath(root, "pending", "good.req.json"), []byte(`{"a":1}`))
	mustFile(t, outside, []byte("secret bytes"))
	mustFile(t, in("dup.req.json"), []byte(`{"dup":true}`))
	mustFile(t, qpath(root, "pending", "dup.req.json"), requestBytes("dup.req.json"))
	mustFile(t, in(".writing.req.json"), []byte(`{`))
	if st, _ := os.Lstat(qpath(root, "pending", "good.req.json")); st.Mode().Perm() != 0o600 {
		t.Errorf("ingested file mode %v, want the producer's 0600", st.Mode())
	}
}

func TestScanReportsNonJobs(t *testing.T) {
	root, q := newQueue(t, "")
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, []byte("x"), 0o600)
	os.Symlink(outside, qpath(root, "pending", "s.req.json"))
	os.WriteFile(qpath(root, "pending", "README"), nil, 0o600)
	os.Mkdir(qpath(root, "done", "d.req.json"), 0o700)
	os.WriteFile(qpath(root, "claimed", "f.req.json"), nil, 0o600)
	os.WriteFile(qpath(root, "pending", ".p.req.json.tmp-1-0123456789ab"), nil, 0o600)
	r, err := q.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ig := range r.Ignored {
		got = append(got, ig.Path+": "+ig.Reason)
	}
	sort.Strings(got)
	want := []string{
		"claimed/f.req.json: a regular file, not a directory",
		"done/d.req.json: a directory, not a regular file",
		"pending/README: not a job name",
		"pending/s.req.json: a symlink, not a regular file",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ignored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Jobs) != 0 || len(r.Temps) != 1 || r.Temps[0].PID != 1 || !r.Temps[0].Alive {
		t.Fatalf("jobs %v temps %+v", r.Jobs, r.Temps)
	}
	// None of them is ever claimed.
	if _, _, err := q.Claim(Owner{Worker: "w"}); !errors.Is(err, ErrEmpty) {
		t.Fatalf("claim: %v", err)
	}
}

func TestTempNames(t *testing.T) {
	for _, target := range []string{"a.req.json", "a.req.json.result", "worker"} {
		name := fsops.TempBase(target)
		got, pid, ok := parseTempName(name)
		if !ok || got != target || pid != os.Getpid() {
			t.Fatalf("%s -> %q %d %v", name, got, pid, ok)
		}
		if ValidJobName(name) == nil {
			t.Fatalf("temporary %s is a valid job name", name)
		}
	}
	for _, bad := range []string{"a.req.json", ".a.tmp-", ".a.tmp-0-0123456789ab", ".a.tmp-01-0123456789ab", ".a.tmp-1-0123", "x.tmp-1-0123456789ab"} {
		if _, _, ok := parseTempName(bad); ok {
			t.Errorf("parseTempName(%q) accepted", bad)
		}
	}
}

// TestFinishResultCheckedByRename: Finish does not look up J.result in
// its own terminal directory before it writes; the no-replace rename of
// its result is that check. Whatever is there, the refusal is the one a
// lookup would have given, nothing is left behind (no temporary, the
// claim as it was), and a blocker at J.result is named before one at J.
func TestFinishResultCheckedByRename(t *testing.T) {
	root, q := newQueue(t, t.TempDir())
	const J = "a.req.json"
	mustPublish(t, q, J)
	if _, _, err := q.Claim(Owner{Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	noTemps := func() {
		t.Helper()
		for _, d := range []string{"done", "failed"} {
			names, _ := os.ReadDir(qpath(root, d))
			for _, n := range names {
				if strings.HasPrefix(n.Name(), ".") {
					t.Errorf("left in %s/: %s", d, n.Name())
				}
			}
		}
	}
	res := qpath(root, "done", J+ResultSuffix)
	os.WriteFile(res, []byte("earlier"), 0o640)
	_, err := q.Finish(J, Done, []byte("mine"), FinishOptions{})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "is interrupted-finish (result written, request not yet moved beside it") || !strings.Contains(err.Error(), "nothing written") {
		t.Fatalf("over an earlier result: %v", err)
	}
	mustFile(t, res, []byte("earlier"))
	noTemps()
	os.Remove(res)

	// A FIFO at J.result and a directory at J: J.result is named.
	unix.Mkfifo(res, 0o640)
	os.Mkdir(qpath(root, "done", J), 0o750)
	_, err = q.Finish(J, Done, []byte("mine"), FinishOptions{})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), J+ResultSuffix+" already exists and is a fifo") {
		t.Fatalf("blocked: %v", err)
	}
	os.Remove(res)
	// The directory at J alone is refused before anything is written.
	_, err = q.Finish(J, Done, []byte("mine"), FinishOptions{})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "/done/"+J+" already exists and is a directory") {
		t.Fatalf("blocked at J: %v", err)
	}
	if _, err := os.Lstat(res); !os.IsNotExist(err) {
		t.Fatalf("a result was written: %v", err)
	}
	noTemps()
	os.Remove(qpath(root, "done", J))
	mustState(t, q, J, StateClaimed)
	if _, err := q.Finish(J, Done, []byte("mine"), FinishOptions{}); err != nil {
		t.Fatal(err)
	}
	mustFile(t, res, []byte("mine"))
}

// TestEmptyDirBySize: on tmpfs a state directory is empty exactly when its
// size says so, whatever appears in it (a hidden temporary, a directory,
// a FIFO); elsewhere it is never taken as empty.
func TestEmptyDirBySize(t *testing.T) {
	for _, base := range []string{fastDir(t), t.TempDir()} {
		root, q := newQueue(t, base)
		var sfs unix.Statfs_t
		if err := unix.Statfs(base, &sfs); err != nil {
			t.Fatal(err)
		}
		tmpfs := sfs.Type == unix.TMPFS_MAGIC
		if got := q.emptyDir(dFailed); got != tmpfs {
			t.Fatalf("%s: empty failed/ read as empty %v (tmpfs %v)", base, got, tmpfs)
		}
		failed := qpath(root, "failed")
		for _, plant := range []func(string) error{
			func(p string) error { return os.WriteFile(p, nil, 0o640) },
			func(p string) error { return os.Mkdir(p, 0o750) },
			func(p string) error { return unix.Mkfifo(p, 0o640) },
		} {
			for _, name := range []string{"a.req.json", ".tmp-1-000000000000"} {
				p := filepath.Join(failed, name)
				if err := plant(p); err != nil {
					t.Fatal(err)
				}
				if q.emptyDir(dFailed) {
					t.Fatalf("%s: failed/ with %s read as empty", base, name)
				}
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if got := q.emptyDir(dFailed); got != tmpfs {
					t.Fatalf("%s: failed/ emptied again read as empty %v", base, got)
				}
			}
		}
		q.Close()
	}
}
