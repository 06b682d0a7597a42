package ctx

import (
	"fmt"

	"ctx/applets/cli"
	"ctx/fsops/queue"
)

// ctx queue publish [--root DIR] SPACE [FILE|-] [--name J]
func QueuePublish(e *cli.Env, args []string) int {
	var rootFlag, name string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.String("name", &name)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, 2)
	if !ok {
		return code
	}
	if name != "" {
		if err := queue.ValidJobName(name); err != nil {
			return cli.Fail(e, cli.Usage, "--name: %s", err)
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
