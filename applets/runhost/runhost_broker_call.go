package runhost

import (
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// One brokered tool call, from the request on the broker socket to the
// reply: who may call, the host's decision (decide, runhost_broker.go),
// the order the sandbox's init runs, the wait for its exit or for the
// caller to go away, and the one tool.call event every call leaves.

// cancelWait bounds how long a cancelled call waits for the init's report
// that its process group is gone.
const cancelWait = 5 * time.Second

// handle serves one connection from peer p: a program joining the run
// (join), or a tool call (call).
// It first waits (handshakeTimeout at most) for the request, then checks
// who sent it and takes one of the peer's side's call slots.
func (b *Broker) handle(fd int, p brokerPeer) {
	conn := broker.Pollable(fd, "broker-call") // its waits in the netpoller
	defer conn.Close()
	began := time.Now()
	broker.SetRecvDeadline(conn, began.Add(handshakeTimeout))
	var req broker.Request
	files, err := broker.RecvFile(conn, &req, 3)
	b.gate.spoke(p, fd)
	broker.SetRecvDeadline(conn, time.Time{})
	// A call closes them as soon as the sandbox has them (closing an
	// *os.File again does nothing).
	defer closeFiles(files)
	if err != nil {
		broker.SendFile(conn, broker.Reply{Exit: cli.Usage, Error: err.Error()}, nil)
		return
	}
	if req.HostOp != nil {
		// A call's own process asks its host operation on the call's
		// channel (runhost_callchannel.go); on the socket every process
		// of the run reaches, nobody does.
		broker.SendFile(conn, broker.Reply{Exit: cli.Denied, Errno: "EACCES",
			Error: "broker: permission denied: a host operation is taken only on the call's own channel"}, nil)
		return
	}
	if !b.admitted(fd, p, &req) {
		return
	}
	if !b.gate.take(p) {
		broker.SendFile(conn, broker.Reply{Exit: cli.Unavailable, Error: "too many tool calls in flight"}, nil)
		return
	}
	defer b.gate.release(p)
	if req.Join != nil {
		b.join(conn, req.Join, files, p)
		return
	}
	c := &callReply{b: b, conn: conn, began: began, ev: fsops.Event{Type: "tool.call", Object: "tool/" + req.Tool, PID: p.pid}}
	b.call(c, &req, files, p.inside)
}

// callReply is the answer to one tool call in progress: the tool.call
// event it will leave and the connection the reply goes to.
type callReply struct {
	b     *Broker
	conn  *os.File
	began time.Time
	ev    fsops.Event
	ran   bool // admitted and handed to the sandbox: its record was reserved
}

// send records the call's event, with a status from its exit unless one
// was set, and replies exit and msg to the caller. Every call, allowed,
// refused or failed, ends here once.
func (c *callReply) send(exit int, msg string) {
	b, ev := c.b, &c.ev
	ev.Exit = &exit
	ev.DurMS = float64(time.Since(c.began).Microseconds()) / 1000
	if ev.Status == "" {
		switch {
		case exit == 0:
			ev.Status = "ok"
		case exit == cli.Denied:
			ev.Status = "denied"
		case ev.Errno == "ETIMEDOUT":
			ev.Status = "timeout" // the tool's own limit (tool_timeout_s)
		case ev.Errno == "ECANCELED":
			ev.Status = "cancelled"
		default:
			ev.Status = "error"
		}
	}
	if err := b.R.record(*ev, c.ran); err != nil && c.ran {
		// It ran, but its record is not whole anywhere it must be: the
		// caller is not told it went as if recorded.
		exit, msg = cli.Unavailable, fmt.Sprintf("%s: it ran, but its record could not be written (%v): later calls are refused until it can", strings.TrimPrefix(ev.Object, "tool/"), err)
	}
	if c.ran {
		b.inFlight.Add(-1)
	}
	broker.SendFile(c.conn, broker.Reply{Exit: exit, Error: msg}, nil)
}

// call is the run host's side of a tool call from a caller handle has
// let in: decided (admit), ordered to the sandbox's init with the
// caller's descriptors (and, for a tool with a host operation, the
// call's channel), awaited, and recorded from the init's report of its
// exit, with what the tool reported of it, as the caller is answered.
func (b *Broker) call(c *callReply, req *broker.Request, files []*os.File, fromRun bool) {
	dec, ok := b.admit(c, req, files)
	if !ok {
		return
	}
	c.ran = true
	b.inFlight.Add(1)
	if dec.builtin && hostOpTools[req.Tool] {
		ops, end, err := b.openCallChannel(req.Tool)
		if err != nil {
			c.send(cli.Internal, fmt.Sprintf("%s: no channel for the call: %v", req.Tool, err))
			return
		}
		defer ops.end()
		files = append(files, end)
	}
	id, done := b.expect()
	order := b.execOrder(req, dec, id, fromRun)
	if err := b.sendOrder(order, files); err != nil {
		closeFiles(files)
		c.send(cli.Unavailable, fmt.Sprintf("%s: the sandbox cannot take the call: %v", req.Tool, err))
		return
	}
	o, cancelled := b.await(c.conn, id, done)
	if o.Tool != nil {
		rep := sanitizeReport(*o.Tool)
		c.ev.Errno, c.ev.Layer, c.ev.Detail = rep.Errno, rep.Layer, rep.Detail
	}
	switch {
	case cancelled:
		c.ev.Status = "cancelled"
		c.send(o.Status, "")
	case o.Error != "":
		c.send(o.Status, fmt.Sprintf("%s: %s", req.Tool, o.Error))
	default:
		c.send(o.Status, "")
	}
}

// admit decides a call before anything runs: a valid request, a tool the
// agent may run now (decide), a host that can record it, input its schema
// accepts. A caller that only asks for the decision (req.Decide) is
// answered here. It returns false once it has replied.
func (b *Broker) admit(c *callReply, req *broker.Request, files []*os.File) (decision, bool) {
	if policy.ValidName(req.Tool) != nil || (len(files) != 3 && req.Decide == nil) {
		c.ev.Object = "tool/-"
		c.send(cli.Usage, "a broker request names a valid tool and passes three descriptors")
		return decision{}, false
	}
	dec := b.decide(req.Tool)
	if dec.path == "" {
		c.ev.Errno, c.ev.Layer = "EACCES", dec.layer
		exit := cli.Denied
		if dec.layer == "" {
			c.ev.Errno, exit = "ENOENT", cli.NotFound
		}
		c.send(exit, fmt.Sprintf("%s: %s", req.Tool, dec.why))
		return dec, false
	}
	// Fail closed: a call the host cannot record is not run; room for
	// its record is reserved before it runs (runhost_record.go). Its
	// refusal is not written either once the log budget is spent (the
	// budget's own event says so, once) or the disk is full.
	if err := b.reserveRecord(req.Tool, b.inFlight.Load()); err != nil {
		c.ev.Errno = "ENOSPC"
		c.send(cli.Unavailable, fmt.Sprintf("%s: refused: %v", req.Tool, err))
		return dec, false
	}
	// A program that is not ctx does not check its input against its
	// schema itself: given one JSON object, the host does, before it runs
	// (ctx's own tools and MCP-projected ones validate their input).
	if err := dec.validate(req.Args); err != nil {
		c.ev.Errno = "EINVAL"
		c.send(cli.Usage, fmt.Sprintf("%s: EINVAL: %v", req.Tool, err))
		return dec, false
	}
	if d := req.Decide; d != nil {
		// Allowed, but the caller runs it (a terminal tool) or has
		// refused it itself: recorded from this decision, not run here.
		if t, ok := toolrun.BuiltinTools[req.Tool]; ok && t.Passthrough && d.Terminal {
			c.ev.Status, c.ev.Detail = "started", "a terminal tool: it runs in the caller's process, its exit is not observed"
			c.send(cli.OK, "")
			return dec, false
		}
		c.ev.Status, c.ev.Errno, c.ev.Layer, c.ev.Detail = "denied", "EACCES", "caller", "refused by the caller before it ran"
		c.send(cli.Denied, fmt.Sprintf("%s: refused by the caller", req.Tool))
		return dec, false
	}
	return dec, true
}

// execOrder is the order that has the sandbox's init run an allowed call:
// the tool's file as decided, in the caller's working directory and
// environment (bounded), executed (a program that is not ctx) or in a
// tool worker (ctx's own: a builtin, an MCP-projected tool, or
// ctx-hooked-tool around a program with hooks).
func (b *Broker) execOrder(req *broker.Request, dec decision, id uint64, fromRun bool) broker.Order {
	cwd := req.Cwd
	if b.R.iso == policy.IsoLandlock && within(cwd, sandboxplan.SandboxWorkspace) {
		// A caller outside the run (ctx run from the host) names the
		// sandbox's workspace; a landlock run has only the host's path.
		cwd = b.R.workspace + strings.TrimPrefix(cwd, sandboxplan.SandboxWorkspace)
	}
	env := brokerEnv(req.Env)
	if !fromRun {
		// The person's call into a landlock run: the run's own environment,
		// whose paths are the host's (a caller outside names the sandbox's).
		env = b.R.env
	}
	order := broker.Order{Op: broker.OpExec, ID: id, Path: dec.path, Argv: append([]string{req.Tool}, req.Args...),
		Env: env, Cwd: cwd, Worker: dec.worker}
	if dec.worker && !dec.builtin {
		// An MCP-projected tool finds its control directory beside the
		// path it runs as (applets/mcptool.go), not beside the worker's
		// binary.
		order.Argv[0] = dec.path
	}
	if dec.hooked && b.R.plan.Worker != "" {
		// A third-party program has its pre and post hooks run around
		// it by ctx (hooked_tool.go), as ctx's own tools run theirs.
		order.Path = b.R.plan.Worker
		order.Argv = append([]string{toolrun.HookedToolApplet, req.Tool, dec.path}, req.Args...)
	}
	return order
}

// expect makes a new order id and the channel its exit report (readInit)
// arrives on.
func (b *Broker) expect() (uint64, chan broker.InitReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	done := make(chan broker.InitReport, 1)
	b.waiting[b.nextID] = done
	return b.nextID, done
}

// sendOrder hands order and the caller's three descriptors (and the
// call's channel) to the sandbox's init, and closes this process's copies
// once the init has them (the tool's pipes end when the tool's ends
// close). An order the init cannot take is no longer waited for.
func (b *Broker) sendOrder(order broker.Order, files []*os.File) error {
	var fds []int
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	if err := broker.SendFile(b.host, order, fds); err != nil {
		b.mu.Lock()
		delete(b.waiting, order.ID)
		b.mu.Unlock()
		return err
	}
	closeFiles(files)
	return nil
}

// closeFiles closes the descriptors a caller passed.
func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// await waits for the init's report of order id on done. The caller going
// away first (Ctrl-C, a kill, an MCP cancel closing conn) cancels it: the
// init kills the order's whole process group, and the report that it has
// ended (or, after cancelWait, a SIGKILL status) is returned with
// cancelled true.
func (b *Broker) await(conn *os.File, id uint64, done chan broker.InitReport) (o broker.InitReport, cancelled bool) {
	gone := make(chan struct{})
	go func() {
		broker.AwaitHangupFile(conn) // returns at the latest when handle closes conn
		close(gone)
	}()
	select {
	case o := <-done:
		return o, false
	case <-gone:
		broker.SendFile(b.host, broker.Order{Op: broker.OpKill, ID: id}, nil)
		select {
		case o := <-done:
			o.Error = ""
			return o, true
		case <-time.After(cancelWait):
			return broker.InitReport{Op: broker.OpExit, ID: id, Status: cli.Signaled(unix.SIGKILL)}, true
		}
	}
}

// brokerEnv bounds the caller's environment passed to the tool and drops
// the marker of a direct execution (broker.BrokeredEnv): a brokered tool's
// own calls are brokered too.
func brokerEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, broker.BrokeredEnv+"=") || strings.IndexByte(kv, 0) >= 0 {
			continue
		}
		if len(out) == 1024 {
			break
		}
		out = append(out, kv)
	}
	return out
}

// Bounds of a reported field (the event line is bounded as a whole too).
const (
	maxReportErrno  = 32
	maxReportLayer  = 64
	maxReportDetail = 512
)

// sanitizeReport keeps of a tool's report what is valid: an errno name
// the kernel has, a layer of ctx's checks, and a detail of valid UTF-8 cut
// at a character boundary within maxReportDetail bytes. The escaping of
// control characters is the event encoder's and the printer's.
func sanitizeReport(rep broker.Report) broker.Report {
	var out broker.Report
	if len(rep.Errno) <= maxReportErrno && toolrun.ErrnoByName(rep.Errno) != 0 {
		out.Errno = rep.Errno
	}
	if len(rep.Layer) <= maxReportLayer && policy.KnownLayer(rep.Layer) {
		out.Layer = rep.Layer
	}
	out.Detail = boundUTF8(strings.ToValidUTF8(rep.Detail, "\uFFFD"), maxReportDetail)
	return out
}

// boundUTF8 cuts s to at most n bytes at a character boundary.
func boundUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
