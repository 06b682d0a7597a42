package applets

import (
	"fmt"

	"ctx/applets/cli"
	"ctx/fsops/queue"
)

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
			return fail(e, cli.Usage, "--name: %s", err)
		}
	}
	q, code := queueOpen(e, rootFlag, pos[0], "write")
	if code != cli.OK {
		return code
	}
	defer q.Close()
	data, code := queueInput(e, pos, 1, queue.MaxRequest, "request")
	if code != cli.OK {
		return code
	}
	job, err := q.Publish(name, data)
	if err != nil {
		return queueFail(e, err)
	}
	fmt.Fprintln(e.Stdout, q.PendingPath(job))
	return cli.OK
}
