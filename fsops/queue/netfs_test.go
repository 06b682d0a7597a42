package queue

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestNetFSExactlyOnce: two hosts (two sshfs mounts of one export, each
// worker in its own UTS namespace) with three workers each drain 300
// jobs. Every job is claimed by exactly one worker and finished once
// with that worker's result; none is lost; the queue is left complete;
// each host's event log has only whole lines, one claim per job in all.
func TestNetFSExactlyOnce(t *testing.T) {
	a, b := twoHosts(t)
	q, err := Open(a, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if fs := q.FS(); fs.Type != "fuse.sshfs" || !fs.Remote || q.FSWarning() != "" {
		t.Fatalf("filesystem %+v, warning %q: want fuse.sshfs, remote, safe options recognised", fs, q.FSWarning())
	}
	const jobs = 200
	for i := 0; i < jobs; i++ {
		if _, err := q.Publish(fmt.Sprintf("job-%04d.req.json", i), requestBytes(fmt.Sprintf("job-%04d.req.json", i))); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for w := 0; w < 6; w++ {
		root, host := a, "hosta"
		if w%2 == 1 {
			root, host = b, "hostb"
		}
		c := hostChild(t, root, host, "worker", fmt.Sprintf("QUEUE_TEST_WORKER=w%d", w))
		out := &bytes.Buffer{}
		c.Stdout, c.Stderr = out, os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, c), append(outs, out)
	}
	for w, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
	}
	took := time.Since(t0)
	owner := map[string]string{}
	for w, out := range outs {
		for _, j := range strings.Fields(out.String()) {
			if prev, dup := owner[j]; dup {
				t.Fatalf("job %s claimed by w%d and by %s", j, w, prev)
			}
			owner[j] = fmt.Sprintf("w%d", w)
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
	for j, w := range owner {
		if r.States[j] != StateDone {
			t.Fatalf("%s is %s", j, r.States[j])
		}
		mustFile(t, qpath(a, "done", j), requestBytes(j))
		mustFile(t, qpath(a, "done", j+ResultSuffix), []byte(w+":"+j))
	}
	claims := 0
	for _, host := range []string{"hosta", "hostb"} {
		log, err := os.ReadFile(qpath(a, LogName+"."+host))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(log), "\n"), "\n") {
			var ev struct{ Type string }
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("log.%s: torn line %q: %v", host, line, err)
			}
			if ev.Type == "queue.claim" {
				claims++
			}
		}
	}
	if claims != jobs {
		t.Fatalf("logs show %d claims, want %d", claims, jobs)
	}
	t.Logf("%d jobs over sshfs, 2 hosts x 3 workers: %v (%.0f jobs/s)", jobs, took.Round(time.Millisecond), jobs/took.Seconds())
}

// TestNetFSPublishIngestRace: host A publishes named jobs while host B
// ingests inbox files of the same names. Each name must end up published
// by exactly one of them, with that one's bytes: never both reporting
// success (a silent replacement), never a file replaced under a report.
func TestNetFSPublishIngestRace(t *testing.T) {
	a, b := twoHosts(t)
	const rounds = 120
	pub := hostChild(t, a, "hosta", "race")
	ing := hostChild(t, b, "hostb", "ingest")
	pubIn, pubOut := pipes(t, pub)
	ingIn, ingOut := pipes(t, ing)
	replaced, byIngest := 0, 0
	for i := 0; i < rounds; i++ {
		// Lockstep: the inbox file, then both told at once.
		j := fmt.Sprintf("race-%04d.req.json", i)
		if err := os.WriteFile(qpath(b, "inbox", j), []byte(`"ingested"`), 0o640); err != nil {
			t.Fatal(err)
		}
		// The publisher starts 0 to 42 ms later, so that some rounds meet
		// in the middle of each other's steps.
		fmt.Fprintln(ingIn, j)
		time.Sleep(time.Duration(i%15) * 3 * time.Millisecond)
		fmt.Fprintln(pubIn, j)
		published := readLine(t, pubOut) == "P "+j
		ingested := 0
		for l := readLine(t, ingOut); l != "-"; l = readLine(t, ingOut) {
			if l != "I "+j {
				t.Fatalf("round %d: ingest reported %q", i, l)
			}
			ingested++
		}
		os.Remove(qpath(b, "inbox", j)) // a skipped file: not for the next round
		switch {
		case ingested > 1:
			t.Fatalf("%s reported ingested %d times", j, ingested)
		case published && ingested == 1:
			replaced++
			continue
		case ingested == 1:
			byIngest++
			mustFile(t, qpath(a, "pending", j), []byte(`"ingested"`))
		case published:
			mustFile(t, qpath(a, "pending", j), []byte(`"published"`))
		default:
			t.Fatalf("%s: neither published nor ingested", j)
		}
	}
	pubIn.Close()
	ingIn.Close()
	pub.Wait()
	ing.Wait()
	if replaced > 0 {
		t.Fatalf("%d of %d names published and ingested both: silent replacement", replaced, rounds)
	}
	t.Logf("%d names raced: %d ingested, %d published", rounds, byIngest, rounds-byIngest)
}

// pipes starts cmd with its stdin and stdout as pipes.
func pipes(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return in, bufio.NewReader(out)
}

// readLine reads one line, failing the test after 20 s.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := r.ReadString('\n')
		ch <- strings.TrimSuffix(l, "\n")
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("child did not answer in 20 s")
	}
	return ""
}
