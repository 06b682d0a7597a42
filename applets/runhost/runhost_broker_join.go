package runhost

import (
	"fmt"
	"os"
	"strings"
	"time"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/broker"
)

// maxJoinArgs bounds the argv of a program joining a run.
const maxJoinArgs = 1024

// join starts a program in this run for a caller outside it: a second ctx
// agent start (or MCP server) for the running agent. The program runs as
// the agent's own program does (its environment, working directory, uid
// and walls), with the caller's descriptors, in a process group of its
// own; the run lasts until it has ended too. Closing the connection ends
// it. One agent.join event records it, with its exit. Only the person who
// started the run gets this far (broker.admitted: their uid and the run's
// secret).
func (b *Broker) join(conn *os.File, j *broker.Join, files []*os.File, p brokerPeer) {
	began := time.Now()
	ev := fsops.Event{Type: "agent.join", Object: "agent/" + b.R.Agent.Name, PID: p.pid}
	reply := func(exit int, msg string) {
		ev.Exit = &exit
		ev.DurMS = float64(time.Since(began).Microseconds()) / 1000
		if ev.Status == "" {
			ev.Status = "ok"
			if exit != 0 {
				ev.Status = "error"
			}
		}
		b.R.recordEvent(ev)
		broker.SendFile(conn, broker.Reply{Exit: exit, Error: msg}, nil)
	}
	switch {
	case p.inside:
		// A process of the run starts programs itself; one joined would
		// keep the run alive past its program.
		ev.Status = "denied"
		reply(cli.Denied, "a program joins a run from outside it (ctx agent start on the host)")
		return
	case len(files) != 3 || len(j.Argv) == 0 || len(j.Argv) > maxJoinArgs:
		reply(cli.Usage, "a join names a program and passes three descriptors")
		return
	}
	ev.Detail = "program " + j.Argv[0] // bounded by the event's line builder
	var env []string
	for _, kv := range b.R.env {
		if !strings.HasPrefix(kv, "CTX_RUN_FD=") {
			env = append(env, kv)
		}
	}
	id, done := b.expect()
	order := broker.Order{Op: broker.OpRun, ID: id, Argv: j.Argv, Env: env, Cwd: b.R.plan.Cwd}
	if err := b.sendOrder(order, files); err != nil {
		reply(cli.Unavailable, fmt.Sprintf("the sandbox cannot take the program: %v", err))
		return
	}
	o, cancelled := b.await(conn, id, done)
	if cancelled {
		ev.Status = "cancelled"
	}
	reply(o.Status, o.Error)
}
