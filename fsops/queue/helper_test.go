package queue

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The crash and concurrency tests run real processes: the test binary
// re-executes itself with QUEUE_TEST_CHILD naming a role. Only this test
// file reads that variable, and only a child may set stepHook, so nothing
// of this exists in a production binary.
func TestMain(m *testing.M) {
	if role := os.Getenv("QUEUE_TEST_CHILD"); role != "" {
		setTestHost()
		os.Exit(childMain(role))
	}
	if code, ok := inPrivateMounts(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// inPrivateMounts runs the package's tests again in a mount namespace of
// their own, as root: the network filesystem tests mount sshfs, and other
// packages' tests running at the same time compare the host's mount table
// before and after a sandbox (nothing may be left mounted there). It
// reports false in the re-run itself, and where namespaces are refused.
func inPrivateMounts() (int, bool) {
	if os.Geteuid() != 0 || os.Getenv("QUEUE_TEST_PRIVATE_MOUNTS") != "" {
		return 0, false
	}
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Env = append(os.Environ(), "QUEUE_TEST_PRIVATE_MOUNTS=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Go marks / MS_REC|MS_PRIVATE in the child after unsharing, so no
	// mount made there propagates back.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "queue tests: no mount namespace of their own (%v); running in the host's\n", err)
		return 0, false
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), true
	}
	if err != nil {
		return 1, true
	}
	return 0, true
}

// childMain runs one child role and returns its exit status:
//
//	op      run QUEUE_TEST_OP on QUEUE_TEST_JOB; with QUEUE_TEST_CRASH set,
//	        SIGKILL itself at that step (exit 3 if the step never came)
//	worker  claim and finish jobs as QUEUE_TEST_WORKER until the queue is
//	        empty, printing each claimed name
//	chaos   publish, claim and finish jobs forever, printing
//	        acknowledgements, until the parent kills it
func childMain(role string) int {
	root, space := os.Getenv("QUEUE_TEST_ROOT"), os.Getenv("QUEUE_TEST_SPACE")
	if target := os.Getenv("QUEUE_TEST_CRASH"); target != "" {
		stepHook = func(s string) {
			if s == target {
				unix.Kill(os.Getpid(), unix.SIGKILL)
				select {}
			}
		}
	}
	q, err := Open(root, space)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	switch role {
	case "op":
		err = childOp(q, os.Getenv("QUEUE_TEST_OP"), os.Getenv("QUEUE_TEST_JOB"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		if os.Getenv("QUEUE_TEST_CRASH") != "" {
			return 3
		}
		return 0
	case "worker":
		w := os.Getenv("QUEUE_TEST_WORKER")
		for {
			job, _, err := q.Claim(Owner{Worker: w})
			if errors.Is(err, ErrEmpty) {
				return 0
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				return 2
			}
			fmt.Fprintln(out, job)
			if _, err := q.Finish(job, Done, []byte(w+":"+job), FinishOptions{}); err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				return 2
			}
		}
	case "chaos":
		// Acknowledgements go straight to stdout (unbuffered): a line
		// printed is a step the parent may hold us to.
		prefix := os.Getenv("QUEUE_TEST_PREFIX")
		fmt.Println("R")
		for i := 0; ; i++ {
			name := fmt.Sprintf("%s-%05d.req.json", prefix, i)
			if _, err := q.Publish(name, requestBytes(name)); err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				return 2
			}
			fmt.Printf("P %s\n", name)
			job, _, err := q.Claim(Owner{Worker: "chaos"})
			if err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				return 2
			}
			st := chaosStatus(job)
			if _, err := q.Finish(job, st, resultBytes(job), FinishOptions{}); err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				return 2
			}
			fmt.Printf("F %s %s\n", job, st)
		}
	}
	out.Flush()
	return netChild(q, role)
}

func childOp(q *Queue, op, job string) error {
	switch op {
	case "publish":
		_, err := q.Publish(job, requestBytes(job))
		return err
	case "claim":
		got, _, err := q.Claim(Owner{Worker: "child"})
		if err == nil && got != job {
			err = fmt.Errorf("claimed %s, want %s", got, job)
		}
		return err
	case "finish-done", "finish-failed":
		if err := childOp(q, "claim", job); err != nil {
			return err
		}
		_, err := q.Finish(job, Status(strings.TrimPrefix(op, "finish-")), resultBytes(job), FinishOptions{})
		return err
	case "recover":
		_, err := q.Recover(job, false)
		return err
	case "ingest":
		_, skipped, err := q.Ingest()
		if err == nil && len(skipped) > 0 {
			err = fmt.Errorf("skipped %v", skipped)
		}
		return err
	}
	return fmt.Errorf("unknown op %q", op)
}

// requestBytes and resultBytes are the deterministic contents every test
// job is published and finished with, so an audit can tell whole files
// from partial, foreign or overwritten ones.
func requestBytes(job string) []byte {
	return []byte(`{"job":"` + job + `","pad":"` + strings.Repeat("r", 100) + `"}`)
}
func resultBytes(job string) []byte { return []byte("result of " + job + "\n") }

func chaosStatus(job string) Status {
	if len(job)%2 == 0 {
		return Done
	}
	return Failed
}

// child starts the test binary in a child role.
func child(t testing.TB, root, space, role string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QUEUE_TEST_CHILD="+role, "QUEUE_TEST_ROOT="+root, "QUEUE_TEST_SPACE="+space)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// runChild runs a child op and reports whether it died of SIGKILL.
func runChild(t testing.TB, root, space string, env ...string) (killed bool, stderr string) {
	t.Helper()
	cmd := child(t, root, space, "op", env...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, errb.String()
		}
		t.Fatalf("child %v: %v: %s", env, err, errb.String())
	}
	if err != nil {
		t.Fatalf("child %v: %v", env, err)
	}
	return false, errb.String()
}

// fastDir returns a directory for tests that make many files: tmpfs when
// /dev/shm is usable (fsync there costs nothing, so the suite stays quick
// and tests measure the protocol, not the disk), else the test temp dir.
func fastDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "ctx-queue-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// newQueue makes a root with shared space "proj" and opens its queue.
func newQueue(t testing.TB, base string) (root string, q *Queue) {
	t.Helper()
	if base == "" {
		base = t.TempDir()
	}
	root = filepath.Join(base, "ctx")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateSpace(root, "proj"); err != nil {
		t.Fatal(err)
	}
	q, err := Open(root, "proj")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return root, q
}

func qpath(root string, elem ...string) string {
	return filepath.Join(append([]string{root, "shared", "proj", "queue"}, elem...)...)
}

func mustPublish(t testing.TB, q *Queue, job string) {
	t.Helper()
	if _, err := q.Publish(job, requestBytes(job)); err != nil {
		t.Fatal(err)
	}
}

func mustFile(t testing.TB, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", path, got, want)
	}
}

func mustState(t testing.TB, q *Queue, job string, want State) {
	t.Helper()
	ev, err := q.Inspect(job)
	if err != nil {
		t.Fatal(err)
	}
	if got, why := Classify(ev); got != want {
		t.Fatalf("%s: state %s (%s; evidence %v), want %s", job, got, why, ev.Paths(), want)
	}
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// audit checks the invariants that must hold for the whole queue at rest:
// no incomplete job, no temporaries, nothing ignored, every request and
// result exactly the bytes it was written with. It returns each job's state.
func audit(t testing.TB, root string, q *Queue) map[string]State {
	t.Helper()
	r, err := q.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Incomplete(); len(f) > 0 {
		t.Fatalf("audit: incomplete jobs: %+v", f)
	}
	if len(r.Temps) > 0 || len(r.Ignored) > 0 {
		t.Fatalf("audit: temps %+v ignored %+v", r.Temps, r.Ignored)
	}
	for _, ev := range r.Jobs {
		j := ev.Job
		switch r.States[j] {
		case StatePending:
			mustFile(t, qpath(root, "pending", j), requestBytes(j))
		case StateClaimed:
			mustFile(t, qpath(root, "claimed", j, j), requestBytes(j))
		case StateDone, StateFailed:
			d := string(r.States[j])
			mustFile(t, qpath(root, d, j), requestBytes(j))
			mustFile(t, qpath(root, d, j+ResultSuffix), resultBytes(j))
		}
	}
	return r.States
}

// drain claims and finishes every pending job in this process.
func drain(t testing.TB, q *Queue) {
	t.Helper()
	for {
		job, _, err := q.Claim(Owner{Worker: "drain"})
		if errors.Is(err, ErrEmpty) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Finish(job, Done, resultBytes(job), FinishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func envs(kv ...string) []string {
	var out []string
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, kv[i]+"="+kv[i+1])
	}
	return out
}

var _ = strconv.Itoa
var _ = time.Now
