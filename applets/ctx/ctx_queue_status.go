package ctx

import (
	"fmt"

	"ctx/applets/cli"
	"ctx/fsops/queue"
)

// ctx queue status [--root DIR] SPACE [--counts]
func QueueStatus(e *cli.Env, args []string) int {
	var countsOnly bool
	q, _, code := queueVerb(e, args, 1, "read", func(f *cli.FlagSet) { f.Bool("counts", &countsOnly) })
	if q == nil {
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
		return cli.OK
	}
	for _, ev := range r.Jobs {
		st := r.States[ev.Job]
		switch {
		case st == queue.StateClaimed:
			if l := ev.LeaseData; l != nil {
				h, _ := l.HolderState()
				fmt.Fprintf(e.Stdout, "claimed %s worker=%s pid=%d host=%s holder=%s\n", cli.Escape(ev.Job), cli.Escape(l.Worker), l.PID, cli.Escape(l.Host), h)
			} else {
				fmt.Fprintf(e.Stdout, "claimed %s holder=unknown (lease unreadable)\n", cli.Escape(ev.Job))
			}
		case st.Complete():
			fmt.Fprintf(e.Stdout, "%s %s\n", st, cli.Escape(ev.Job))
		default:
			fmt.Fprintf(e.Stdout, "incomplete %s %s\n", cli.Escape(ev.Job), st)
		}
	}
	for _, name := range r.Inbox {
		fmt.Fprintf(e.Stdout, "inbox %s\n", cli.Escape(name))
	}
	return cli.OK
}
