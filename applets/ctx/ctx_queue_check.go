package ctx

import (
	"fmt"
	"strings"

	"ctx/applets/cli"
)

// ctx queue check [--root DIR] SPACE
func QueueCheck(e *cli.Env, args []string) int {
	q, _, code := queueVerb(e, args, 1, "read", nil)
	if q == nil {
		return code
	}
	defer q.Close()
	r, err := q.Scan()
	if err != nil {
		return queueFail(e, err)
	}
	for _, fd := range r.Incomplete() {
		fmt.Fprintf(e.Stdout, "incomplete %s %s: %s: %s\n", cli.Escape(fd.Job), fd.State, cli.Escape(fd.Reason), cli.Escape(strings.Join(fd.Evidence, " ")))
	}
	for _, t := range r.Temps {
		life := "gone"
		if t.Alive {
			life = "alive"
		}
		fmt.Fprintf(e.Stdout, "temp %s pid=%d %s\n", cli.Escape(t.Path), t.PID, life)
	}
	for _, ig := range r.Ignored {
		fmt.Fprintf(e.Stdout, "ignored %s: %s\n", cli.Escape(ig.Path), ig.Reason)
	}
	if len(r.Incomplete()) > 0 {
		return cli.Failure
	}
	return cli.OK
}
