package queue

import (
	"errors"
	"fmt"
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
	hb := 500 * time.Millisecond
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
