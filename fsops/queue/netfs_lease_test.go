package queue

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// holdOn starts a "hold" child on host (mount root) that claims the one
// pending job with heartbeat hb, renewing it or not, and returns the job
// and its token, and the pipes to tell it to finish.
func holdOn(t *testing.T, root, host string, hb time.Duration, renew bool) (job, token string, tell func() string, kill func()) {
	t.Helper()
	env := []string{"QUEUE_TEST_HEARTBEAT=" + hb.String()}
	if !renew {
		env = append(env, "QUEUE_TEST_RENEW=no")
	}
	cmd := hostChild(t, root, host, "hold", env...)
	in, out := pipes(t, cmd)
	job, token, _ = strings.Cut(readLine(t, out), " ")
	if ValidJobName(job) != nil || len(token) != 16 {
		t.Fatalf("hold child printed %q %q", job, token)
	}
	tell = func() string {
		fmt.Fprintln(in, "finish")
		return readLine(t, out)
	}
	kill = func() { cmd.Process.Kill(); cmd.Wait() }
	return job, token, tell, kill
}

// TestNetFSLeaseExpiry: a worker on host A holds a claim and renews it;
// host B cannot recover it without --force while it is renewed, though
// more than the expiry has passed since the claim. Once the worker is
// killed and the lease goes unrenewed for more than 3 heartbeats (and the
// second SFTP timestamps may lose), B recovers it without --force, and
// claims and finishes it.
func TestNetFSLeaseExpiry(t *testing.T) {
	a, b := twoHosts(t)
	qa, err := Open(a, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer qa.Close()
	mustPublish(t, qa, "lease-1.req.json")
	// A heartbeat of a second: the renewing child may go without a core
	// for up to two of them on a loaded machine (sshfs, its sshd and sftp
	// server compete for the same cores) before its lease truly expires.
	hb := time.Second
	job, _, _, kill := holdOn(t, a, "hosta", hb, true)
	defer kill()
	qb, err := Open(b, "proj") // this process is a third host
	if err != nil {
		t.Fatal(err)
	}
	defer qb.Close()
	time.Sleep(LeaseExpiry*hb + 600*time.Millisecond)
	if _, err := qb.Recover(job, false); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "renewed") {
		t.Fatalf("recover of a renewed lease from another host: %v, want a conflict saying it is renewed", err)
	}
	mustState(t, qb, job, StateClaimed)
	kill()
	time.Sleep(LeaseExpiry*hb + coarseSlack + 600*time.Millisecond)
	rec, err := qb.Recover(job, false)
	if err != nil || rec.To != StatePending {
		t.Fatalf("recover of an abandoned lease without --force: %+v, %v", rec, err)
	}
	got, _, err := qb.Claim(Owner{Worker: "b"})
	if err != nil || got != job {
		t.Fatalf("claim after recovery: %q, %v", got, err)
	}
	if _, err := qb.Finish(job, Done, resultBytes(job), FinishOptions{}); err != nil {
		t.Fatal(err)
	}
	mustState(t, qa, job, StateDone)
}

// TestNetFSTokenFinish: a worker on host A stops renewing; host B
// recovers the abandoned claim and claims the job again under the same
// worker name. A's late finish must be refused (its token is not the
// lease's) and change nothing; B's finish stands.
func TestNetFSTokenFinish(t *testing.T) {
	a, b := twoHosts(t)
	qa, err := Open(a, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer qa.Close()
	mustPublish(t, qa, "token-1.req.json")
	hb := 200 * time.Millisecond
	job, token, tell, kill := holdOn(t, a, "hosta", hb, false)
	defer kill()
	qb, err := Open(b, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer qb.Close()
	time.Sleep(LeaseExpiry*hb + coarseSlack + 500*time.Millisecond)
	if _, err := qb.Recover(job, false); err != nil {
		t.Fatalf("recover of an unrenewed lease: %v", err)
	}
	got, l, err := qb.Claim(Owner{Worker: "w"}) // the same worker name as A's
	if err != nil || got != job || l.Token == token {
		t.Fatalf("re-claim: %q %q, %v", got, l.Token, err)
	}
	if said := tell(); said == "finished" || !strings.Contains(said, "another claim") {
		t.Fatalf("the old holder's finish: %q, want a refusal naming another claim", said)
	}
	mustState(t, qb, job, StateClaimed)
	if _, err := qb.Finish(job, Done, []byte("b's result"), FinishOptions{Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	mustFile(t, qpath(a, "done", job+ResultSuffix), []byte("b's result"))
}

// TestNetFSPlaceholder: sshfs (libfuse) renames a file removed while
// still open to .fuse_hiddenNNN and removes that only when it is closed,
// and the kernel closes FUSE files asynchronously, so a lease the queue
// has just written or read can leave such a placeholder in lease/J after
// its removal returned. Made to happen here by holding files in lease/J
// open: Finish neither takes the placeholder for a foreign entry (it
// would refuse the job as a conflict) nor fails to remove lease/J while
// it stands (ENOTEMPTY); it waits for it to go. check lists it, as
// ignored, while it stands.
func TestNetFSPlaceholder(t *testing.T) {
	a, _ := twoHosts(t)
	q, err := Open(a, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	mustPublish(t, q, "ph-1.req.json")
	job, _, err := q.Claim(Owner{Worker: "w"})
	if err != nil {
		t.Fatal(err)
	}
	// A placeholder before Finish looks: a file in lease/J, held open,
	// removed.
	stray := qpath(a, "lease", job, "stray")
	if err := os.WriteFile(stray, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(stray)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	// And the lease itself held open, so its removal leaves another.
	lease, err := os.Open(qpath(a, "lease", job, "worker"))
	if err != nil {
		t.Fatal(err)
	}
	placeholders := func() (names []string) {
		ents, _ := os.ReadDir(qpath(a, "lease", job))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".fuse_hidden") {
				names = append(names, e.Name())
			}
		}
		return names
	}
	// (One more may stand for the lease's temporary: the race this is
	// about.)
	if len(placeholders()) == 0 {
		t.Fatalf("no placeholder to test with: sshfs removed the open file (lease/J holds %v)", placeholders())
	}
	r, err := q.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Ignored) == 0 || r.States[job] != StateClaimed {
		t.Fatalf("check with a placeholder: state %s, ignored %v", r.States[job], r.Ignored)
	}
	for _, ig := range r.Ignored {
		if !strings.Contains(ig.Reason, "placeholder") {
			t.Fatalf("check with a placeholder: ignored %v", r.Ignored)
		}
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		held.Close()
		lease.Close()
	}()
	if _, err := q.Finish(job, Done, []byte("ok"), FinishOptions{}); err != nil {
		t.Fatalf("finish beside a placeholder: %v", err)
	}
	mustState(t, q, job, StateDone)
	if _, err := os.Stat(qpath(a, "lease", job)); !os.IsNotExist(err) {
		t.Fatalf("lease/J left behind: %v", err)
	}
}
