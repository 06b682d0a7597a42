package ctx

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"ctx/applets/cli"
	"ctx/fsops/proc"
	"ctx/fsops/queue"
)

// ctx queue exec [--root DIR] SPACE --worker W [--timeout DURATION] [--heartbeat DURATION] -- CMD [ARG...]
func QueueExec(e *cli.Env, args []string) int {
	var rootFlag, worker, timeoutFlag, hbFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.String("worker", &worker)
	f.String("timeout", &timeoutFlag)
	f.String("heartbeat", &hbFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	switch {
	case worker == "":
		return cli.UsageError(e, "missing --worker W")
	case queue.ValidWorkerName(worker) != nil:
		return cli.Fail(e, cli.Usage, "--worker: invalid name %q", worker)
	case len(f.Command) == 0:
		return cli.UsageError(e, "missing -- CMD")
	}
	var timeout time.Duration
	if timeoutFlag != "" {
		d, err := time.ParseDuration(timeoutFlag)
		if err != nil || d <= 0 {
			return cli.Fail(e, cli.Usage, "--timeout: %q is not a positive duration (e.g. 30s, 5m)", timeoutFlag)
		}
		timeout = d
	}
	hb, code := queueHeartbeat(e, hbFlag)
	if code != cli.OK {
		return code
	}
	q, code := queueOpen(e, rootFlag, pos[0], "write")
	if code != cli.OK {
		return code
	}
	defer q.Close()
	// Resolve the command before claiming, so a typo never takes a job.
	path, code := queueLookCommand(e, f.Command[0])
	if code != cli.OK {
		return code
	}
	job, lease, err := q.Claim(queue.Owner{Worker: worker, Heartbeat: hb}) // the lease is ours: we live until finish
	if err != nil {
		return queueFail(e, err)
	}
	// Renew the lease while the command runs, so another host does not
	// take the job as abandoned; a lost claim is said at once.
	stop := make(chan struct{})
	q.Heartbeat(job, lease.Token, time.Duration(lease.HeartbeatMS)*time.Millisecond, stop, func(err error) {
		cli.Warnf(e, "lease not renewed: %v", err)
	})
	req, err := q.ReadRequest(job)
	var out []byte
	var exit int
	var why string
	if err != nil {
		exit, why = -1, "request unreadable: "+err.Error()
	} else {
		out, exit, why = queueRunJob(e, path, f.Command, req, timeout, []string{
			"CTX_QUEUE_SPACE=" + pos[0], "CTX_QUEUE_JOB=" + job, "CTX_QUEUE_WORKER=" + worker})
	}
	st := queue.Done
	if exit != 0 || why != "" {
		st = queue.Failed
	}
	close(stop)
	final, err := q.Finish(job, st, out, queue.FinishOptions{Worker: worker, Exit: &exit})
	if err != nil {
		return queueFail(e, err)
	}
	fmt.Fprintln(e.Stdout, final)
	if st == queue.Failed {
		if why == "" {
			why = "exit status " + strconv.Itoa(exit)
		}
		cli.Errorf(e.Stderr, e.Name, "%s failed: %s", job, why)
		return cli.Failure
	}
	return cli.OK
}

// queueLookCommand finds CMD as a shell would: a name with a slash as given,
// else the first executable regular file of that name in $PATH.
func queueLookCommand(e *cli.Env, name string) (string, int) {
	if strings.Contains(name, "/") {
		st, err := os.Stat(name)
		switch {
		case err != nil:
			return "", cli.Fail(e, cli.NotFound, "%s: %s", name, err)
		case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
			return "", cli.Fail(e, cli.NotExec, "%s: not an executable file", name)
		}
		return name, cli.OK
	}
	for _, dir := range filepath.SplitList(e.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, cli.OK
		}
	}
	return "", cli.Fail(e, cli.NotFound, "%s: command not found in PATH", name)
}

// queueRunJob runs the job command with the request on stdin, its stdout
// captured (at most queue.MaxResult bytes) and its stderr passed through.
// It returns the output, the exit status (128+N for signal N, -1 when it
// could not start) and, when the run failed for a reason other than a
// non-zero exit, why.
func queueRunJob(e *cli.Env, path string, argv []string, req []byte, timeout time.Duration, env []string) ([]byte, int, string) {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Stdin = bytes.NewReader(req)
	// A result past queue.MaxResult stops the copy (the command gets
	// EPIPE): the job fails, it is not truncated.
	out := &proc.Capped{Limit: queue.MaxResult, StopOver: true}
	cmd.Stdout = out
	cmd.Stderr = e.Stderr
	// The command inherits the applet's environment (what the caller gave
	// ctx, through Env) plus the job's coordinates.
	cmd.Env = append(e.Environ(), env...)
	// Its own process group, and a tree that ends whole (proc.StartTree):
	// a timeout, or the end of the command, kills everything it started,
	// daemons included. And it dies with us: a lease names this process,
	// and a job must not outlive the process recover will judge it by.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 2 * time.Second
	runtime.LockOSThread() // Pdeathsig follows the thread that forked
	defer runtime.UnlockOSThread()
	tree, err := proc.StartTree(cmd)
	if err != nil {
		return nil, -1, err.Error()
	}
	why := ""
	var timedOut atomic.Bool
	if timeout > 0 {
		timer := time.AfterFunc(timeout, func() {
			timedOut.Store(true)
			tree.Kill()
		})
		defer timer.Stop()
	}
	err = tree.Wait()
	if timedOut.Load() {
		why = "timed out after " + timeout.String()
	}
	if out.Truncated() {
		why = fmt.Sprintf("output larger than %d bytes", queue.MaxResult)
	}
	exit := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		exit = proc.ExitCode(ee.ProcessState)
	case err != nil && why == "":
		why = err.Error()
	}
	return out.Bytes(), exit, why
}
