package ctx

import (
	"fmt"
	"os"
	"strconv"

	"ctx/applets/cli"
	"ctx/fsops/queue"
)

// ctx queue claim [--root DIR] SPACE --worker W [--pid PID] [--heartbeat DURATION] [--print-token]
func QueueClaim(e *cli.Env, args []string) int {
	var rootFlag, worker, pidFlag, hbFlag string
	var printToken bool
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.String("worker", &worker)
	f.String("pid", &pidFlag)
	f.String("heartbeat", &hbFlag)
	f.Bool("print-token", &printToken)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	if worker == "" {
		return cli.UsageError(e, "missing --worker W")
	}
	if err := queue.ValidWorkerName(worker); err != nil {
		return cli.Fail(e, cli.Usage, "--worker: %s", err)
	}
	// The claim command exits at once; the lease belongs to the process
	// that runs the job, by default the one that called us.
	pid := os.Getppid()
	if pidFlag != "" {
		n, err := strconv.Atoi(pidFlag)
		if err != nil || n < 1 {
			return cli.Fail(e, cli.Usage, "--pid: %q is not a process id", pidFlag)
		}
		pid = n
	}
	if pid < 1 {
		return cli.Fail(e, cli.Usage, "the parent process is outside this PID namespace; name the lease holder with --pid")
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
	job, lease, err := q.Claim(queue.Owner{Worker: worker, PID: pid, Heartbeat: hb})
	if err != nil {
		return queueFail(e, err)
	}
	if printToken {
		// The token is what finish --token checks: the claim itself,
		// whatever the worker's name.
		fmt.Fprintf(e.Stdout, "%s\t%s\n", q.ClaimedPath(job), lease.Token)
		return cli.OK
	}
	fmt.Fprintln(e.Stdout, q.ClaimedPath(job))
	return cli.OK
}
