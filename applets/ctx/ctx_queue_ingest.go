package ctx

import (
	"fmt"

	"ctx/applets/cli"
)

// ctx queue ingest [--root DIR] SPACE
func QueueIngest(e *cli.Env, args []string) int {
	q, _, code := queueVerb(e, args, 1, "write", nil)
	if q == nil {
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
		return cli.Failure
	}
	return cli.OK
}
