package queue

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// docSteps returns the step boundaries listed in the package doc.
func docSteps(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "are named for the crash tests:\n//\n")
	if !ok {
		t.Fatal("doc.go: step list not found")
	}
	var steps []string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "//\t") {
			break
		}
		steps = append(steps, strings.Fields(strings.TrimPrefix(line, "//\t"))...)
	}
	return steps
}

// TestStepsDocumented runs every operation once, recording the step
// boundaries it passes, and checks they are exactly the documented list in
// the documented order, so the crash tests below cover every boundary.
func TestStepsDocumented(t *testing.T) {
	root, q := newQueue(t, "")
	var seen []string
	stepHook = func(s string) { seen = append(seen, s) }
	defer func() { stepHook = nil }()
	mustPublish(t, q, "a.req.json")
	if _, _, err := q.Claim(Owner{Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Finish("a.req.json", Done, nil, FinishOptions{}); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, q, "b.req.json")
	if _, _, err := q.Claim(Owner{Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Recover("b.req.json", true); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(qpath(root, "inbox", "c.req.json"), []byte(`{}`), 0o600)
	if p, _, err := q.Ingest(); err != nil || len(p) != 1 {
		t.Fatal(p, err)
	}
	var uniq []string
	for _, s := range seen {
		if len(uniq) == 0 || uniq[len(uniq)-1] != s {
			uniq = append(uniq, s)
		}
	}
	// publish and claim run twice; keep the first occurrence of each.
	var order []string
	have := map[string]bool{}
	for _, s := range uniq {
		if !have[s] {
			have[s] = true
			order = append(order, s)
		}
	}
	want := docSteps(t)
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("steps passed:\n%s\ndocumented:\n%s", strings.Join(order, " "), strings.Join(want, " "))
	}
}

// Bystanders: jobs in every state that no crash of another job may touch.
const (
	jobX       = "a-x.req.json" // sorts first: the one a child claims
	byPending  = "z-b1.req.json"
	byClaimed  = "z-b2.req.json" // claimed by the test process, alive
	byDone     = "z-b3.req.json"
	byFailed   = "z-b4.req.json"
	manualPage = "../../manual/ctx.shared.md"
)

func setupBystanders(t *testing.T, q *Queue) {
	t.Helper()
	for _, c := range []struct {
		job string
		st  Status
	}{{byClaimed, ""}, {byDone, Done}, {byFailed, Failed}} {
		mustPublish(t, q, c.job)
		if got, _, err := q.Claim(Owner{Worker: "parent"}); err != nil || got != c.job {
			t.Fatalf("claim %s: %s %v", c.job, got, err)
		}
		if c.st != "" {
			if _, err := q.Finish(c.job, c.st, resultBytes(c.job), FinishOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustPublish(t, q, byPending)
}

func checkBystanders(t *testing.T, root string, q *Queue) {
	t.Helper()
	mustState(t, q, byPending, StatePending)
	mustState(t, q, byClaimed, StateClaimed)
	mustState(t, q, byDone, StateDone)
	mustState(t, q, byFailed, StateFailed)
	mustFile(t, qpath(root, "pending", byPending), requestBytes(byPending))
	mustFile(t, qpath(root, "claimed", byClaimed, byClaimed), requestBytes(byClaimed))
	mustFile(t, qpath(root, "done", byDone+ResultSuffix), resultBytes(byDone))
	mustFile(t, qpath(root, "failed", byFailed+ResultSuffix), resultBytes(byFailed))
}

// reconcileUnleased runs the shell commands the manual gives for an
// unleased claim, exactly as printed there.
func reconcileUnleased(t *testing.T, q *Queue, job string) {
	t.Helper()
	b, err := os.ReadFile(manualPage)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "### Reconciling an unleased claim\n")
	if !ok {
		t.Fatalf("%s: no section \"Reconciling an unleased claim\"", manualPage)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	script, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("%s: no sh block in \"Reconciling an unleased claim\"", manualPage)
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "QUEUE="+q.Dir, "J="+job)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("manual reconciliation of %s: %v\n%s", job, err, out)
	}
}

type crashCase struct {
	op    string
	steps []string
	setup func(t *testing.T, root string, q *Queue)
	// want is X's state right after the crash; then Recover(X) must fail
	// with recoverErr (nil for success) and leave X in after.
	want, after State
	recoverErr  error
}

func TestCrashAtEveryStep(t *testing.T) { crashAtEveryStep(t, fastDir(t), false) }

// TestNetFSCrashAtEveryStep: the same kills on an sshfs mount, where
// no-replace renames are links and unlinks: the first step of each case
// (every round trip costs there; the local test covers every step).
func TestNetFSCrashAtEveryStep(t *testing.T) {
	n := startNetFS(t)
	crashAtEveryStep(t, n.mount(t, safeSSHFS), true)
}

// crashAtEveryStep runs the crash cases in directories under base; with
// firstOnly, only the first step of each.
func crashAtEveryStep(t *testing.T, base string, firstOnly bool) {
	publishX := func(t *testing.T, root string, q *Queue) { mustPublish(t, q, jobX) }
	claimedByDeadChild := func(t *testing.T, root string, q *Queue) {
		publishX(t, root, q)
		if killed, _ := runChild(t, root, "proj", envs("QUEUE_TEST_OP", "claim", "QUEUE_TEST_JOB", jobX)...); killed {
			t.Fatal("setup child killed")
		}
	}
	interruptedFinish := func(t *testing.T, root string, q *Queue) {
		publishX(t, root, q)
		if killed, _ := runChild(t, root, "proj", envs("QUEUE_TEST_OP", "finish-done", "QUEUE_TEST_JOB", jobX, "QUEUE_TEST_CRASH", "finish.result-synced")...); !killed {
			t.Fatal("setup child not killed")
		}
		mustState(t, q, jobX, StateInterruptedFinish)
	}
	inboxX := func(t *testing.T, root string, q *Queue) {
		os.WriteFile(qpath(root, "inbox", jobX), requestBytes(jobX), 0o640)
	}
	temps := func(prefix string) []string {
		return []string{prefix + ".temp-created", prefix + ".temp-written", prefix + ".temp-synced"}
	}
	cleanups := func(prefix string) []string {
		return []string{prefix + ".lease-removed", prefix + ".lease-dir-removed"}
	}
	var cases []crashCase
	cases = append(cases,
		crashCase{"publish", temps("publish"), nil, StateAbsent, StateAbsent, nil},
		crashCase{"publish", []string{"publish.renamed", "publish.synced"}, nil, StatePending, StatePending, ErrConflict},
		crashCase{"claim", []string{"claim.mkdir"}, publishX, StateResidue, StatePending, nil},
		crashCase{"claim", append([]string{"claim.renamed", "claim.synced", "lease.mkdir"}, temps("lease")...), publishX, StateUnleasedClaim, StateUnleasedClaim, ErrConflict},
		crashCase{"claim", []string{"lease.renamed", "lease.synced"}, publishX, StateClaimed, StatePending, nil},
		crashCase{"recover", append([]string{"recover.renamed", "recover.synced"}, cleanups("recover")...), claimedByDeadChild, StateResidue, StatePending, nil},
		crashCase{"recover", []string{"recover.claim-dir-removed"}, claimedByDeadChild, StatePending, StatePending, ErrConflict},
		crashCase{"recover", append([]string{"recover.renamed", "recover.synced"}, cleanups("recover")...), interruptedFinish, StateResidue, StateDone, nil},
		crashCase{"recover", []string{"recover.claim-dir-removed"}, interruptedFinish, StateDone, StateDone, ErrConflict},
		crashCase{"ingest", []string{"ingest.synced"}, inboxX, StateAbsent, StateAbsent, ErrNotFound},
		crashCase{"ingest", []string{"ingest.renamed", "ingest.dirs-synced"}, inboxX, StatePending, StatePending, ErrConflict},
	)
	for _, st := range []Status{Done, Failed} {
		term := State(st)
		op := "finish-" + string(st)
		cases = append(cases,
			crashCase{op, temps("finish"), publishX, StateClaimed, StatePending, nil},
			crashCase{op, []string{"finish.result-renamed", "finish.result-synced"}, publishX, StateInterruptedFinish, term, nil},
			crashCase{op, append([]string{"finish.request-renamed", "finish.request-synced"}, cleanups("finish")...), publishX, StateResidue, term, nil},
			crashCase{op, []string{"finish.claim-dir-removed"}, publishX, term, term, ErrConflict},
		)
	}
	if firstOnly {
		for i := range cases {
			cases[i].steps = cases[i].steps[:1]
		}
	}
	runCrashCases(t, base, cases, !firstOnly)
}

// runCrashCases runs each case at each of its steps, and checks that every
// documented step has a case.
func runCrashCases(t *testing.T, base string, cases []crashCase, all bool) {
	covered := map[string]bool{}
	n := 0
	for _, c := range cases {
		for _, s := range c.steps {
			covered[s] = true
			n++
			t.Run(c.op+"@"+s, func(t *testing.T) {
				dir, err := os.MkdirTemp(base, "case-")
				if err != nil {
					t.Fatal(err)
				}
				root, q := newQueue(t, dir)
				setupBystanders(t, q)
				if c.setup != nil {
					c.setup(t, root, q)
				}
				killed, stderr := runChild(t, root, "proj", envs("QUEUE_TEST_OP", strings.SplitN(c.op, "@", 2)[0], "QUEUE_TEST_JOB", jobX, "QUEUE_TEST_CRASH", s)...)
				if !killed {
					t.Fatalf("child was not killed at %s: %s", s, stderr)
				}
				// check names exactly the incomplete pairs.
				r, err := q.Scan()
				if err != nil {
					t.Fatal(err)
				}
				var incomplete []string
				for _, f := range r.Incomplete() {
					incomplete = append(incomplete, f.Job+" "+string(f.State))
				}
				var wantIncomplete []string
				if !c.want.Complete() {
					wantIncomplete = []string{jobX + " " + string(c.want)}
				}
				if strings.Join(incomplete, ",") != strings.Join(wantIncomplete, ",") {
					t.Fatalf("check after crash: %v, want %v", incomplete, wantIncomplete)
				}
				mustState(t, q, jobX, c.want)
				checkBystanders(t, root, q)

				_, err = q.Recover(jobX, false)
				if !errors.Is(err, c.recoverErr) || (c.recoverErr == nil) != (err == nil) {
					t.Fatalf("recover: %v, want %v", err, c.recoverErr)
				}
				if c.want == StateUnleasedClaim {
					if _, err := q.Recover(jobX, true); !errors.Is(err, ErrConflict) {
						t.Fatalf("forced recover of an unleased claim: %v", err)
					}
				}
				mustState(t, q, jobX, c.after)
				checkBystanders(t, root, q)
				switch {
				case c.want == StateUnleasedClaim:
					reconcileUnleased(t, q, jobX)
					mustState(t, q, jobX, StatePending)
				case c.op == "ingest" && c.want == StateAbsent:
					if p, _, err := q.Ingest(); err != nil || len(p) != 1 {
						t.Fatalf("re-ingest: %v %v", p, err)
					}
				}
				// Full audit: finish the live bystander, drain, and every
				// job is finished exactly once with exactly its bytes.
				if _, err := q.Finish(byClaimed, Done, resultBytes(byClaimed), FinishOptions{}); err != nil {
					t.Fatal(err)
				}
				drain(t, q)
				states := audit(t, root, q)
				for j, st := range states {
					if st != StateDone && st != StateFailed {
						t.Fatalf("after drain %s is %s", j, st)
					}
				}
				if _, ok := states[jobX]; ok == (c.op == "publish" && c.want == StateAbsent) {
					t.Fatalf("job X present=%v after a crash at %s", ok, s)
				}
			})
		}
	}
	for _, s := range docSteps(t) {
		if all && !covered[s] {
			t.Errorf("step %s has no crash case", s)
		}
	}
	t.Logf("%d crash cases", n)
}

// TestCrashRandomKill kills a child that publishes, claims and finishes in
// a loop at random moments, many times over one queue. After every kill
// the queue is reconciled the documented way and audited: every
// acknowledged publish is present exactly once, every acknowledged finish
// has its status, no file holds anything but the bytes it was written
// with, and the protocol never produced a conflict or orphan.
func TestCrashRandomKill(t *testing.T) {
	runs := 60
	if testing.Short() {
		runs = 15
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	root, q := newQueue(t, fastDir(t))
	published := map[string]bool{}
	finished := map[string]Status{}
	ackLine := regexp.MustCompile(`^(P|F) (\S+)(?: (done|failed))?$`)
	kinds := map[State]int{}
	for run := 0; run < runs; run++ {
		cmd := child(t, root, "proj", "chaos", fmt.Sprintf("QUEUE_TEST_PREFIX=r%03d", run))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan []string)
		ready := make(chan bool, 1)
		go func() {
			var got []string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "R" {
					ready <- true
					continue
				}
				got = append(got, sc.Text())
			}
			lines <- got
		}()
		// Kill at a random moment of the child's work, not of its start.
		select {
		case <-ready:
		case <-time.After(10 * time.Second):
			t.Fatal("chaos child never became ready")
		}
		time.Sleep(time.Duration(rng.Intn(20000)) * time.Microsecond)
		cmd.Process.Kill()
		got := <-lines
		cmd.Wait()
		for _, l := range got {
			m := ackLine.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("run %d: bad child line %q", run, l)
			}
			if m[1] == "P" {
				published[m[2]] = true
			} else {
				finished[m[2]] = Status(m[3])
			}
		}
		reconcileAll(t, q, kinds)
		states := audit(t, root, q)
		for j := range published {
			if st := states[j]; st != StatePending && st != StateDone && st != StateFailed {
				t.Fatalf("run %d: acknowledged job %s is %s", run, j, st)
			}
		}
		for j, st := range finished {
			if states[j] != State(st) {
				t.Fatalf("run %d: job %s acknowledged %s, is %s", run, j, st, states[j])
			}
		}
	}
	drain(t, q)
	states := audit(t, root, q)
	for j := range published {
		if st := states[j]; st != StateDone && st != StateFailed {
			t.Fatalf("after drain %s is %s", j, st)
		}
	}
	t.Logf("%d runs, %d jobs published, %d finished by the child; crash states reconciled: %v", runs, len(published), len(finished), kinds)
}

// reconcileAll brings a queue whose workers are all dead back to complete
// states the documented way: recover every incomplete job recover
// handles, reconcile unleased claims by hand, recover claims whose holder
// is gone, and recover jobs that have stale temporaries.
func reconcileAll(t *testing.T, q *Queue, kinds map[State]int) {
	t.Helper()
	r, err := q.Scan()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Incomplete() {
		kinds[f.State]++
		switch f.State {
		case StateResidue, StateInterruptedFinish:
			if _, err := q.Recover(f.Job, false); err != nil {
				t.Fatalf("recover %s (%s): %v", f.Job, f.State, err)
			}
		case StateUnleasedClaim:
			if _, err := q.Recover(f.Job, false); !errors.Is(err, ErrConflict) {
				t.Fatalf("recover of unleased %s: %v", f.Job, err)
			}
			reconcileUnleased(t, q, f.Job)
		default:
			t.Fatalf("the protocol produced %s for %s: %s %v", f.State, f.Job, f.Reason, f.Evidence)
		}
	}
	for _, ev := range r.Jobs {
		if r.States[ev.Job] == StateClaimed {
			kinds["abandoned-claim"]++
			if _, err := q.Recover(ev.Job, false); err != nil {
				t.Fatalf("recover abandoned %s: %v", ev.Job, err)
			}
		}
	}
	if r, err = q.Scan(); err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, tmp := range r.Temps {
		if tmp.Alive {
			t.Fatalf("temporary %s of a live pid after the child died", tmp.Path)
		}
		job := strings.TrimSuffix(tmp.Target, ResultSuffix)
		if ValidJobName(job) == nil {
			jobs = append(jobs, job)
		}
	}
	sort.Strings(jobs)
	for i, j := range jobs {
		if i > 0 && jobs[i-1] == j {
			continue
		}
		kinds["stale-temp"]++
		if _, err := q.Recover(j, false); err != nil {
			t.Fatalf("recover temporaries of %s: %v", j, err)
		}
	}
}
