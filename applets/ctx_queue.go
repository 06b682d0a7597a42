package applets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/fsops/queue"
	"ctx/ptyterm"
)

// queueVerbs are the verbs of `ctx queue`, with the permission each needs
// on the shared space in an agent context.
var queueVerbs = map[string]struct {
	perm string
	run  func(e *Env, args []string) int
}{
	"publish": {"write", queuePublish},
	"claim":   {"write", queueClaim},
	"finish":  {"write", queueFinish},
	"recover": {"write", queueRecover},
	"ingest":  {"write", queueIngest},
	"exec":    {"write", queueExec},
	"status":  {"read", queueStatus},
	"check":   {"read", queueCheck},
}

// runQueue is `ctx queue VERB [--root DIR] SPACE ...`.
func runQueue(e *Env, args []string) int {
	if len(args) == 0 {
		return usageError(e, "missing verb (publish, claim, finish, recover, status, check, ingest, exec)")
	}
	v, ok := queueVerbs[args[0]]
	if !ok {
		return usageError(e, "unknown verb %q", args[0])
	}
	e.Name = "ctx queue " + args[0]
	if len(args) == 2 && (args[1] == "--help" || args[1] == "-h") {
		return printHelp(e, "ctx-queue")
	}
	return v.run(e, args[1:])
}

// queueOpen checks the space name and the caller's authority, then opens
// the queue. code is non-zero when the verb must stop.
func queueOpen(e *Env, rootFlag, space, perm string) (q *queue.Queue, code int) {
	if err := queue.ValidSpaceName(space); err != nil {
		return nil, fail(e, exitUsage, "space: %s", err)
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	if code := authorizeShared(e, root, space, perm); code != exitOK {
		return nil, code
	}
	q, err := queue.Open(root.Dir, space)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fail(e, exitFailure, "%s (create the space with: ctx shared new%s %s)", err, root.Option(), space)
		}
		return nil, fail(e, queueExit(err), "%v", err)
	}
	q.Actor = queue.Actor{Agent: e.Getenv("CTX_AGENT"), Session: e.Getenv("CTX_SESSION"), Run: e.Getenv("CTX_RUN_ID")}
	q.OnLogError = func(err error) {
		warnf(e, "event not logged: %v", err)
	}
	return q, exitOK
}

// queueExit maps a queue error to an exit status: the queue's own
// outcomes, then the one errno mapping (cli.ErrExit: 13 for EACCES or
// EPERM, else 1).
func queueExit(err error) int {
	switch {
	case errors.Is(err, queue.ErrEmpty):
		return exitTempFail
	case errors.Is(err, queue.ErrInvalid):
		return exitUsage
	}
	return cli.ErrExit(err, exitFailure)
}

func queueFail(e *Env, err error) int {
	return fail(e, queueExit(err), "%v", err)
}

// queueInput reads FILE, or standard input for "-" or no argument, at most
// limit bytes.
func queueInput(e *Env, pos []string, i int, limit int64, what string) ([]byte, int) {
	var r io.Reader = e.Stdin
	name := "standard input"
	if len(pos) > i && pos[i] != "-" {
		f, err := os.Open(pos[i])
		if err != nil {
			return nil, failErr(e, exitFailure, err)
		}
		defer f.Close()
		r, name = f, pos[i]
	}
	b, err := fsops.ReadLimited(r, name, limit)
	switch {
	case errors.Is(err, syscall.EFBIG):
		return nil, fail(e, exitUsage, "%s from %s is larger than %d bytes", what, name, limit)
	case err != nil:
		return nil, fail(e, cli.ErrExit(err, exitFailure), "reading %s: %s", name, err)
	}
	return b, exitOK
}

// queueJobArg accepts a job name or the claimed path `ctx queue claim` printed
// for it.
func queueJobArg(e *Env, q *queue.Queue, arg string) (string, int) {
	if !strings.Contains(arg, "/") {
		if err := queue.ValidJobName(arg); err != nil {
			return "", fail(e, exitUsage, "job: %s", err)
		}
		return arg, exitOK
	}
	job := filepath.Base(arg)
	abs, _ := filepath.Abs(arg)
	if queue.ValidJobName(job) != nil || abs != q.ClaimedPath(job) {
		return "", fail(e, exitUsage, "job: %q is neither a job name nor its path in %s", arg, filepath.Join(q.Dir, "claimed"))
	}
	return job, exitOK
}

// ctx queue publish [--root DIR] SPACE [FILE|-] [--name J]
func queuePublish(e *Env, args []string) int {
	var rootFlag, name string
	f := newFlags()
	f.String("root", &rootFlag)
	f.String("name", &name)
	pos, code, ok := parseArgs(e, f, args, 1, 2)
	if !ok {
		return code
	}
	if name != "" {
		if err := queue.ValidJobName(name); err != nil {
			return fail(e, exitUsage, "--name: %s", err)
		}
	}
	q, code := queueOpen(e, rootFlag, pos[0], "write")
	if code != exitOK {
		return code
	}
	defer q.Close()
	data, code := queueInput(e, pos, 1, queue.MaxRequest, "request")
	if code != exitOK {
		return code
	}
	job, err := q.Publish(name, data)
	if err != nil {
		return queueFail(e, err)
	}
	fmt.Fprintln(e.Stdout, q.PendingPath(job))
	return exitOK
}

// ctx queue claim [--root DIR] SPACE --worker W [--pid PID]
func queueClaim(e *Env, args []string) int {
	var rootFlag, worker, pidFlag string
	f := newFlags()
	f.String("root", &rootFlag)
	f.String("worker", &worker)
	f.String("pid", &pidFlag)
	pos, code, ok := parseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	if worker == "" {
		return usageError(e, "missing --worker W")
	}
	if err := queue.ValidWorkerName(worker); err != nil {
		return fail(e, exitUsage, "--worker: %s", err)
	}
	// The claim command exits at once; the lease belongs to the process
	// that runs the job, by default the one that called us.
	pid := os.Getppid()
	if pidFlag != "" {
		n, err := strconv.Atoi(pidFlag)
		if err != nil || n < 1 {
			return fail(e, exitUsage, "--pid: %q is not a process id", pidFlag)
		}
		pid = n
	}
	if pid < 1 {
		return fail(e, exitUsage, "the parent process is outside this PID namespace; name the lease holder with --pid")
	}
	q, code := queueOpen(e, rootFlag, pos[0], "write")
	if code != exitOK {
		return code
	}
	defer q.Close()
	job, _, err := q.Claim(queue.Owner{Worker: worker, PID: pid})
	if err != nil {
		return queueFail(e, err)
	}
	fmt.Fprintln(e.Stdout, q.ClaimedPath(job))
	return exitOK
}

// ctx queue finish [--root DIR] SPACE J --status done|failed [RESULT|-] [--worker W]
func queueFinish(e *Env, args []string) int {
	var rootFlag, status, worker string
	f := newFlags()
	f.String("root", &rootFlag)
	f.String("status", &status)
	f.String("worker", &worker)
	pos, code, ok := parseArgs(e, f, args, 2, 3)
	if !ok {
		return code
	}
	st, err := queue.ParseStatus(status)
	if status == "" {
		return usageError(e, "missing --status done|failed")
	}
	if err != nil {
		return fail(e, exitUsage, "--status: %q: must be done or failed", status)
	}
	if worker != "" && queue.ValidWorkerName(worker) != nil {
		return fail(e, exitUsage, "--worker: invalid name %q", worker)
	}
	q, code := queueOpen(e, rootFlag, pos[0], "write")
	if code != exitOK {
		return code
	}
	defer q.Close()
	job, code := queueJobArg(e, q, pos[1])
	if code != exitOK {
		return code
	}
	result, code := queueInput(e, pos, 2, queue.MaxResult, "result")
	if code != exitOK {
		return code
	}
	path, err := q.Finish(job, st, result, queue.FinishOptions{Worker: worker})
	if err != nil {
		return queueFail(e, err)
	}
	fmt.Fprintln(e.Stdout, path)
	return exitOK
}

// ctx queue recover [--root DIR] SPACE J [--force]
func queueRecover(e *Env, args []string) int {
	var rootFlag string
	var force bool
	f := newFlags()
	f.String("root", &rootFlag)
	f.Bool("force", &force)
	pos, code, ok := parseArgs(e, f, args, 2, 2)
	if !ok {
		return code
	}
	q, code := queueOpen(e, rootFlag, pos[0], "write")
	if code != exitOK {
		return code
	}
	defer q.Close()
	job, code := queueJobArg(e, q, pos[1])
	if code != exitOK {
		return code
	}
	rec, err := q.Recover(job, force)
	for _, a := range rec.Actions {
		fmt.Fprintln(e.Stdout, a)
	}
	if err != nil {
		return queueFail(e, err)
	}
	return exitOK
}

// ctx queue status [--root DIR] SPACE [--counts]
func queueStatus(e *Env, args []string) int {
	var rootFlag string
	var countsOnly bool
	f := newFlags()
	f.String("root", &rootFlag)
	f.Bool("counts", &countsOnly)
	pos, code, ok := parseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	q, code := queueOpen(e, rootFlag, pos[0], "read")
	if code != exitOK {
		return code
	}
	defer q.Close()
	r, err := q.Scan()
	if err != nil {
		return queueFail(e, err)
	}
	counts := map[queue.State]int{}
	for _, ev := range r.Jobs {
		st := r.States[ev.Job]
		if !st.Complete() {
			st = "incomplete"
		}
		counts[st]++
	}
	fmt.Fprintf(e.Stdout, "counts pending=%d claimed=%d done=%d failed=%d incomplete=%d inbox=%d\n",
		counts[queue.StatePending], counts[queue.StateClaimed], counts[queue.StateDone],
		counts[queue.StateFailed], counts["incomplete"], len(r.Inbox))
	if countsOnly {
		return exitOK
	}
	for _, ev := range r.Jobs {
		st := r.States[ev.Job]
		switch {
		case st == queue.StateClaimed:
			if l := ev.LeaseData; l != nil {
				h, _ := l.HolderState()
				fmt.Fprintf(e.Stdout, "claimed %s worker=%s pid=%d host=%s holder=%s\n", ev.Job, l.Worker, l.PID, l.Host, h)
			} else {
				fmt.Fprintf(e.Stdout, "claimed %s holder=unknown (lease unreadable)\n", ev.Job)
			}
		case st.Complete():
			fmt.Fprintf(e.Stdout, "%s %s\n", st, ev.Job)
		default:
			fmt.Fprintf(e.Stdout, "incomplete %s %s\n", ev.Job, st)
		}
	}
	for _, name := range r.Inbox {
		fmt.Fprintf(e.Stdout, "inbox %s\n", ptyterm.Escape(name))
	}
	return exitOK
}

// ctx queue check [--root DIR] SPACE
func queueCheck(e *Env, args []string) int {
	var rootFlag string
	f := newFlags()
	f.String("root", &rootFlag)
	pos, code, ok := parseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	q, code := queueOpen(e, rootFlag, pos[0], "read")
	if code != exitOK {
		return code
	}
	defer q.Close()
	r, err := q.Scan()
	if err != nil {
		return queueFail(e, err)
	}
	for _, fd := range r.Incomplete() {
		fmt.Fprintf(e.Stdout, "incomplete %s %s: %s: %s\n", fd.Job, fd.State, fd.Reason, strings.Join(fd.Evidence, " "))
	}
	for _, t := range r.Temps {
		life := "gone"
		if t.Alive {
			life = "alive"
		}
		fmt.Fprintf(e.Stdout, "temp %s pid=%d %s\n", ptyterm.Escape(t.Path), t.PID, life)
	}
	for _, ig := range r.Ignored {
		fmt.Fprintf(e.Stdout, "ignored %s: %s\n", ptyterm.Escape(ig.Path), ig.Reason)
	}
	if len(r.Incomplete()) > 0 {
		return exitFailure
	}
	return exitOK
}

// ctx queue ingest [--root DIR] SPACE
func queueIngest(e *Env, args []string) int {
	var rootFlag string
	f := newFlags()
	f.String("root", &rootFlag)
	pos, code, ok := parseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	q, code := queueOpen(e, rootFlag, pos[0], "write")
	if code != exitOK {
		return code
	}
	defer q.Close()
	published, skipped, err := q.Ingest()
	for _, j := range published {
		fmt.Fprintln(e.Stdout, q.PendingPath(j))
	}
	for _, s := range skipped {
		cli.Errorf(e.Stderr, e.Name, "skipped inbox/%s: %s", s.Name, s.Reason)
	}
	switch {
	case err != nil:
		return queueFail(e, err)
	case len(skipped) > 0:
		return exitFailure
	}
	return exitOK
}

// ctx queue exec [--root DIR] SPACE --worker W [--timeout DURATION] -- CMD [ARG...]
func queueExec(e *Env, args []string) int {
	var rootFlag, worker, timeoutFlag string
	f := newFlags()
	f.String("root", &rootFlag)
	f.String("worker", &worker)
	f.String("timeout", &timeoutFlag)
	pos, code, ok := parseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	switch {
	case worker == "":
		return usageError(e, "missing --worker W")
	case queue.ValidWorkerName(worker) != nil:
		return fail(e, exitUsage, "--worker: invalid name %q", worker)
	case len(f.Command) == 0:
		return usageError(e, "missing -- CMD")
	}
	var timeout time.Duration
	if timeoutFlag != "" {
		d, err := time.ParseDuration(timeoutFlag)
		if err != nil || d <= 0 {
			return fail(e, exitUsage, "--timeout: %q is not a positive duration (e.g. 30s, 5m)", timeoutFlag)
		}
		timeout = d
	}
	q, code := queueOpen(e, rootFlag, pos[0], "write")
	if code != exitOK {
		return code
	}
	defer q.Close()
	// Resolve the command before claiming, so a typo never takes a job.
	path, code := queueLookCommand(e, f.Command[0])
	if code != exitOK {
		return code
	}
	job, _, err := q.Claim(queue.Owner{Worker: worker}) // the lease is ours: we live until finish
	if err != nil {
		return queueFail(e, err)
	}
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
		return exitFailure
	}
	return exitOK
}

// queueLookCommand finds CMD as a shell would: a name with a slash as given,
// else the first executable regular file of that name in $PATH.
func queueLookCommand(e *Env, name string) (string, int) {
	if strings.Contains(name, "/") {
		st, err := os.Stat(name)
		switch {
		case err != nil:
			return "", fail(e, exitNotFound, "%s: %s", name, err)
		case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
			return "", fail(e, exitNotExec, "%s: not an executable file", name)
		}
		return name, exitOK
	}
	for _, dir := range filepath.SplitList(e.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, exitOK
		}
	}
	return "", fail(e, exitNotFound, "%s: command not found in PATH", name)
}

// queueRunJob runs the job command with the request on stdin, its stdout
// captured (at most queue.MaxResult bytes) and its stderr passed through.
// It returns the output, the exit status (128+N for signal N, -1 when it
// could not start) and, when the run failed for a reason other than a
// non-zero exit, why.
func queueRunJob(e *Env, path string, argv []string, req []byte, timeout time.Duration, env []string) ([]byte, int, string) {
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
