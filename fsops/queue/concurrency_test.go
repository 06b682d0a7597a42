package queue

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestConcurrentWorkers: 8 worker processes drain 10,000 jobs. Every job
// must be claimed by exactly one worker, finished once with that worker's
// result, and leave no claim, lease or temporary behind; the event log
// must show each job claimed and finished exactly once.
func TestConcurrentWorkers(t *testing.T) {
	jobs, workers := 10000, 8
	if testing.Short() {
		jobs = 1000
	}
	root, q := newQueue(t, fastDir(t))
	t0 := time.Now()
	for i := 0; i < jobs; i++ {
		if _, err := q.Publish(fmt.Sprintf("job-%05d.req.json", i), []byte(`{"n":`+fmt.Sprint(i)+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	published := time.Since(t0)
	t1 := time.Now()
	cmds := make([]*exec.Cmd, workers)
	outs := make([]*bytes.Buffer, workers)
	for w := range cmds {
		cmds[w] = child(t, root, "proj", "worker", fmt.Sprintf("QUEUE_TEST_WORKER=w%d", w))
		outs[w] = &bytes.Buffer{}
		cmds[w].Stdout = outs[w]
		cmds[w].Stderr = os.Stderr
		if err := cmds[w].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for w, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
	}
	drained := time.Since(t1)

	owner := map[string]string{}
	per := make([]int, workers)
	for w, out := range outs {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			j := sc.Text()
			if prev, dup := owner[j]; dup {
				t.Fatalf("job %s claimed by w%d and by %s", j, w, prev)
			}
			owner[j] = fmt.Sprintf("w%d", w)
			per[w]++
		}
	}
	if len(owner) != jobs {
		t.Fatalf("%d jobs claimed, want %d", len(owner), jobs)
	}
	r, err := q.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Incomplete()) > 0 || len(r.Temps) > 0 || len(r.Ignored) > 0 || len(r.Jobs) != jobs {
		t.Fatalf("after drain: %d jobs, incomplete %v, temps %v, ignored %v", len(r.Jobs), r.Incomplete(), r.Temps, r.Ignored)
	}
	for i := 0; i < jobs; i++ {
		j := fmt.Sprintf("job-%05d.req.json", i)
		if r.States[j] != StateDone {
			t.Fatalf("%s is %s", j, r.States[j])
		}
		mustFile(t, qpath(root, "done", j), []byte(`{"n":`+fmt.Sprint(i)+`}`))
		mustFile(t, qpath(root, "done", j+ResultSuffix), []byte(owner[j]+":"+j))
	}
	// The log: one claim and one finish per job, by the same worker.
	log, err := os.ReadFile(qpath(root, LogName))
	if err != nil {
		t.Fatal(err)
	}
	claims, finishes := map[string]string{}, map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var ev struct{ Type, Object, Worker, Status string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		j := strings.TrimPrefix(ev.Object, "shared/proj/queue/")
		switch ev.Type {
		case "queue.claim":
			if _, dup := claims[j]; dup {
				t.Fatalf("log: %s claimed twice", j)
			}
			claims[j] = ev.Worker
		case "queue.finish":
			finishes[j]++
			if ev.Status != "done" {
				t.Fatalf("log: %s", line)
			}
		}
	}
	for j, w := range owner {
		if claims[j] != w || finishes[j] != 1 {
			t.Fatalf("log: %s claimed by %q (want %s), finished %d times", j, claims[j], w, finishes[j])
		}
	}
	t.Logf("%d jobs: published in %v; %d workers drained them in %v (%.0f jobs/s); per worker %v",
		jobs, published.Round(time.Millisecond), workers, drained.Round(time.Millisecond), float64(jobs)/drained.Seconds(), per)
}
