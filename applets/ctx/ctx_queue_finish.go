package ctx

import (
	"fmt"

	"ctx/applets/cli"
	"ctx/fsops/queue"
)

// ctx queue finish [--root DIR] SPACE J --status done|failed [RESULT|-] [--worker W] [--token T]
func QueueFinish(e *cli.Env, args []string) int {
	var rootFlag, status, worker, token string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.String("status", &status)
	f.String("worker", &worker)
	f.String("token", &token)
	pos, code, ok := cli.ParseArgs(e, f, args, 2, 3)
	if !ok {
		return code
	}
	st, err := queue.ParseStatus(status)
	if status == "" {
		return cli.UsageError(e, "missing --status done|failed")
	}
	if err != nil {
		return cli.Fail(e, cli.Usage, "--status: %q: must be done or failed", status)
	}
	if worker != "" && queue.ValidWorkerName(worker) != nil {
		return cli.Fail(e, cli.Usage, "--worker: invalid name %q", worker)
	}
	if !queueTokenOK(token) {
		return cli.Fail(e, cli.Usage, "--token: %q is not a claim token (hex digits, as claim --print-token prints)", token)
	}
	q, code := queueOpen(e, rootFlag, pos[0], "write")
	if code != cli.OK {
		return code
	}
	defer q.Close()
	job, code := queueJobArg(e, q, pos[1])
	if code != cli.OK {
		return code
	}
	result, code := queueInput(e, pos, 2, queue.MaxResult, "result")
	if code != cli.OK {
		return code
	}
	path, err := q.Finish(job, st, result, queue.FinishOptions{Worker: worker, Token: token})
	if err != nil {
		return queueFail(e, err)
	}
	fmt.Fprintln(e.Stdout, path)
	return cli.OK
}
