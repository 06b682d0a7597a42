package sandbox

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"ctx/fsops/broker"
	"ctx/fsops/proc"
	"ctx/policy/sandboxplan"
)

// initBroker is the sandbox init's side of the run host's broker: it
// executes tool calls on the host's order, from the init's locked thread,
// so every tool process carries the same walls as the agent's program
// (Landlock, seccomp, limits, the agent's uid), and reports how each ended.
type initBroker struct {
	ch     *os.File
	plan   *sandboxplan.Plan
	orders chan brokerDelivery
	byPid  map[int]uint64 // running tool process -> call id
	pgid   map[uint64]int // call id -> its process group
	// idle are the warm workers waiting for an order (worker.go), the
	// last to have waited first; retired are workers killed before they
	// took one; working are the workers running a call, by pid; ended
	// brings the ends of calls after which a worker stays for another
	// (worker_watch.go).
	idle    []*toolWorker
	retired map[int]bool
	working map[int]*toolWorker
	ended   chan workerEnded
	// joined are the programs started into the run by a later ctx agent
	// start (the run host's "run" order): the run lasts while any lives.
	joined map[int]bool
}

// cancelGrace is how long a cancelled tool has to end its own children
// before its process group is killed.
const cancelGrace = 2 * time.Second

type brokerDelivery struct {
	order broker.Order
	files []*os.File
}

// newInitBroker returns the init's broker when the host passed its order
// channel, else nil (a sandbox started without a broker: tests).
func newInitBroker(plan *sandboxplan.Plan) *initBroker {
	ch := brokerChannel
	if ch == nil {
		return nil
	}
	if st, err := ch.Stat(); err != nil || st.Mode()&os.ModeSocket == 0 {
		return nil
	}
	// Waited on through the netpoller (fsops/broker/poll.go), on a
	// descriptor of its own: the unix gate sends its report on ch.
	ch, err := broker.PollableDup(int(ch.Fd()), "broker-init")
	if err != nil {
		return nil
	}
	b := &initBroker{ch: ch, plan: plan, orders: make(chan brokerDelivery, 16),
		byPid: map[int]uint64{}, pgid: map[uint64]int{}, retired: map[int]bool{}, working: map[int]*toolWorker{},
		ended: make(chan workerEnded, endedQueue), joined: map[int]bool{}}
	go b.read()
	return b
}

// read forwards the host's orders to the init's loop, which acts on them
// on its locked thread. It ends when the host closes the channel.
func (b *initBroker) read() {
	for {
		var o broker.Order
		files, err := broker.RecvFile(b.ch, &o, 4)
		if err == broker.ErrClosed {
			close(b.orders)
			return
		}
		if err != nil {
			continue
		}
		b.orders <- brokerDelivery{o, files}
	}
}

// handle carries out one order.
func (b *initBroker) handle(d brokerDelivery) {
	defer func() {
		for _, f := range d.files {
			f.Close()
		}
	}()
	o := d.order
	switch o.Op {
	case broker.OpKill:
		// SIGTERM first: ctx's tools end their own child trees on it
		// (shell.exec's command and whatever that started, setsid'd and
		// double-forked ones included, through its subreaper); then the
		// call's process group is killed outright.
		if pg, ok := b.pgid[o.ID]; ok {
			if w := b.working[pg]; w != nil {
				w.cancelled = true // it takes no other call
			}
			syscall.Kill(pg, syscall.SIGTERM)
			time.AfterFunc(cancelGrace, func() { syscall.Kill(-pg, syscall.SIGKILL) })
		}
	case broker.OpRun:
		// A program joining the run: started like the agent's own
		// program (its environment, no token).
		path := o.Argv0()
		if !strings.Contains(path, "/") {
			path = agentPath(path, o.Env)
		}
		if pid, ok := b.startOrder(o, d.files, path, o.Env); ok {
			b.joined[pid] = true
		}
	case broker.OpConnector:
		b.startConnectorFor(o)
	case broker.OpListen:
		b.listenFor(o)
	case broker.OpExec:
		if o.Worker {
			// ctx's own process: a tool worker is handed the order
			// (with the call's host-operation channel, if the host
			// passed one, as a fourth descriptor).
			b.runInWorker(o, d.files)
			return
		}
		b.startOrder(o, d.files, o.Path, o.Env)
	}
}

// startOrder starts the process of an exec or run order as the agent, with
// the caller's three descriptors, in a process group of its own so that a
// cancel ends it whole, and registers it for its exit report; it reports
// a failure to start as an exec would (126, 127 when not found).
func (b *initBroker) startOrder(o broker.Order, files []*os.File, path string, env []string) (int, bool) {
	if len(files) < 3 || len(o.Argv) == 0 || (o.Op == broker.OpRun && len(files) != 3) {
		b.report(broker.InitReport{Op: broker.OpExit, ID: o.ID, Status: proc.ExitInternal, Error: "an " + string(o.Op) + " order without three descriptors"})
		return 0, false
	}
	cmd := &exec.Cmd{Path: path, Args: o.Argv, Env: env, Dir: o.Cwd, Stdin: files[0], Stdout: files[1], Stderr: files[2],
		ExtraFiles: files[3:]}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: agentCredential(b.plan)}
	if err := cmd.Start(); err != nil {
		b.report(broker.InitReport{Op: broker.OpExit, ID: o.ID, Status: proc.StartFailure(err), Error: err.Error()})
		return 0, false
	}
	b.byPid[cmd.Process.Pid] = o.ID
	b.pgid[o.ID] = cmd.Process.Pid
	return cmd.Process.Pid, true
}

// exited reports a reaped tool process; false when pid is none of ours.
func (b *initBroker) exited(pid, status int) bool {
	if b == nil {
		return false
	}
	if b.dropIdle(pid) {
		// An idle worker died (killed by the agent, a limit): the next
		// call gets another.
		return true
	}
	if b.retired[pid] {
		delete(b.retired, pid)
		return true
	}
	id, ok := b.byPid[pid]
	if !ok {
		return false
	}
	delete(b.byPid, pid)
	delete(b.pgid, id)
	delete(b.joined, pid)
	rep := broker.InitReport{Op: broker.OpExit, ID: id, Status: status}
	if w, ok := b.working[pid]; ok {
		// What the tool reported of its call was queued before it
		// exited: it goes with the exit, in one report.
		rep.Tool = w.finalReport()
		w.conn.Close()
		delete(b.working, pid)
	}
	b.report(rep)
	// The next call's worker starts now, between calls: a warm order
	// finds it waiting (or queues on its socket while it starts).
	b.startWorker()
	return true
}

func (b *initBroker) report(o broker.InitReport) {
	broker.SendFile(b.ch, o, nil)
}

// holding reports whether a joined program still runs: the run goes on
// after its own program has ended until the last of them has too.
func (b *initBroker) holding() bool {
	return b != nil && len(b.joined) > 0
}

// deliveries is the order channel, nil (never ready) without a broker.
func (b *initBroker) deliveries() <-chan brokerDelivery {
	if b == nil {
		return nil
	}
	return b.orders
}
