package ctx

import (
	"fmt"

	"ctx/applets/cli"
)

// ctx queue recover [--root DIR] SPACE J [--force]
func QueueRecover(e *cli.Env, args []string) int {
	var force bool
	q, pos, code := queueVerb(e, args, 2, "write", func(f *cli.FlagSet) { f.Bool("force", &force) })
	if q == nil {
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
