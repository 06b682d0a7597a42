package ctx

import (
	"fmt"

	"ctx/applets/cli"
)

// ctx queue recover [--root DIR] SPACE J [--force]
func QueueRecover(e *cli.Env, args []string) int {
	var rootFlag string
	var force bool
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.Bool("force", &force)
	pos, code, ok := cli.ParseArgs(e, f, args, 2, 2)
	if !ok {
		return code
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
	rec, err := q.Recover(job, force)
	for _, a := range rec.Actions {
		fmt.Fprintln(e.Stdout, cli.Escape(fmt.Sprint(a)))
	}
	if err != nil {
		return queueFail(e, err)
	}
	return cli.OK
}
