package ctx

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/queue"
)

// The verbs of `ctx queue` are rows of the dispatch table (table.go); one
// file each, ctx_queue_VERB.go. This file holds what they share: opening
// the queue with the caller's authority, reading input, naming a job, and
// the exit status of a queue error.

// queueVerb is the start of a verb that opens the queue right after its
// arguments: --root and the flags more registers (nil: none), SPACE and
// the other positional arguments (npos in all), then SPACE's queue opened
// for perm. q is nil when the verb must end with code.
func queueVerb(e *cli.Env, args []string, npos int, perm string, more func(*cli.FlagSet)) (q *queue.Queue, pos []string, code int) {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	if more != nil {
		more(f)
	}
	pos, code, ok := cli.ParseArgs(e, f, args, npos, npos)
	if !ok {
		return nil, nil, code
	}
	q, code = queueOpen(e, rootFlag, pos[0], perm)
	return q, pos, code
}

// queueOpen checks the space name and the caller's authority, then opens
// the queue. code is non-zero when the verb must stop.
func queueOpen(e *cli.Env, rootFlag, space, perm string) (q *queue.Queue, code int) {
	if err := queue.ValidSpaceName(space); err != nil {
		return nil, cli.Fail(e, cli.Usage, "space: %s", err)
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	if code := authorizeShared(e, root, space, perm); code != cli.OK {
		return nil, code
	}
	q, err := queue.Open(root.Dir, space)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, cli.Fail(e, cli.Failure, "%s (if the space lives on a network filesystem, check that it is mounted; else create it with: ctx shared new%s %s)", err, root.Option(), space)
		}
		return nil, cli.Fail(e, QueueExit(err), "%v", err)
	}
	if w := q.FSWarning(); w != "" {
		cli.Warnf(e, "%s", w)
	}
	q.Actor = queue.Actor{Agent: e.Getenv("CTX_AGENT"), Session: e.Getenv("CTX_SESSION"), Run: e.Getenv("CTX_RUN_ID")}
	q.OnLogError = func(err error) {
		cli.Warnf(e, "event not logged: %v", err)
	}
	return q, cli.OK
}

// QueueExit maps a queue error to an exit status: the queue's own
// outcomes, then the one errno mapping (cli.ErrExit: 13 for EACCES or
// EPERM, else 1).
func QueueExit(err error) int {
	switch {
	case errors.Is(err, queue.ErrEmpty):
		return cli.TempFail
	case errors.Is(err, queue.ErrInvalid):
		return cli.Usage
	case errors.Is(err, queue.ErrNotMounted), errors.Is(err, queue.ErrNoPrimitive),
		errors.Is(err, syscall.ENOTCONN), errors.Is(err, syscall.ESTALE):
		return cli.Unavailable
	case errors.Is(err, queue.ErrConflict):
		return cli.Failure
	}
	return cli.ErrExit(err, cli.Failure)
}

func queueFail(e *cli.Env, err error) int {
	if errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ESTALE) {
		return cli.Fail(e, cli.Unavailable, "%v (the network filesystem holding the shared space is not mounted or its server is gone; remount it)", err)
	}
	return cli.Fail(e, QueueExit(err), "%v", err)
}

// queueInput reads FILE, or standard input for "-" or no argument, at most
// limit bytes.
func queueInput(e *cli.Env, pos []string, i int, limit int64, what string) ([]byte, int) {
	var r io.Reader = e.Stdin
	name := "standard input"
	if len(pos) > i && pos[i] != "-" {
		f, err := os.Open(pos[i])
		if err != nil {
			return nil, cli.FailErr(e, cli.Failure, err)
		}
		defer f.Close()
		r, name = f, pos[i]
	}
	b, err := fsops.ReadLimited(r, name, limit)
	switch {
	case errors.Is(err, syscall.EFBIG):
		return nil, cli.Fail(e, cli.Usage, "%s from %s is larger than %d bytes", what, name, limit)
	case err != nil:
		return nil, cli.Fail(e, cli.ErrExit(err, cli.Failure), "reading %s: %s", name, err)
	}
	return b, cli.OK
}

// queueJobArg accepts a job name or the claimed path `ctx queue claim` printed
// for it.
func queueJobArg(e *cli.Env, q *queue.Queue, arg string) (string, int) {
	if !strings.Contains(arg, "/") {
		if err := queue.ValidJobName(arg); err != nil {
			return "", cli.Fail(e, cli.Usage, "job: %s", err)
		}
		return arg, cli.OK
	}
	job := filepath.Base(arg)
	abs, _ := filepath.Abs(arg)
	if queue.ValidJobName(job) != nil || abs != q.ClaimedPath(job) {
		return "", cli.Fail(e, cli.Usage, "job: %q is neither a job name nor its path in %s", arg, filepath.Join(q.Dir, "claimed"))
	}
	return job, cli.OK
}

// queueHeartbeat parses --heartbeat: a positive duration, or 0 for none
// (the lease then never expires); empty is queue.DefaultHeartbeat.
func queueHeartbeat(e *cli.Env, flag string) (time.Duration, int) {
	if flag == "" {
		return 0, cli.OK
	}
	d, err := time.ParseDuration(flag)
	if err != nil || d < 0 || (d > 0 && d < time.Millisecond) || d > 24*time.Hour {
		return 0, cli.Fail(e, cli.Usage, "--heartbeat: %q is not a duration from 1ms to 24h, or 0 (e.g. 10s)", flag)
	}
	if d == 0 {
		return -1, cli.OK
	}
	return d, cli.OK
}

// queueTokenOK accepts "" or a claim token: 1 to 64 lowercase hex digits.
func queueTokenOK(t string) bool {
	if len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
