package applets

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// brokerCall is a call in flight, by its token.
type brokerCall struct {
	tool   string
	report *fsops.BrokerReport // what the tool reported, once
	opDone bool                // its host operation was done (one per call)
}

// maxBrokerCalls bounds the calls one run may have in flight at once.
const maxBrokerCalls = 64

// requestTimeout bounds the wait for a caller's request after it connects.
const requestTimeout = 10 * time.Second

// cancelWait bounds how long a cancelled call waits for the init's report
// that its process group is gone.
const cancelWait = 5 * time.Second

// broker is the run host's side of the tool broker (fsops/broker.go): it
// accepts calls on the socket /mnt/proc shows, decides each against the
// tree as it is on disk at that moment, has the sandbox's init run it, and
// records it. The init's side is fsops/sandbox_broker.go.
type broker struct {
	r      *agentRun
	listen int
	host   *os.File // the host's end of the order channel
	init   *os.File // the init's end, until the sandbox has it

	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]chan fsops.BrokerOrder
	calls   map[string]*brokerCall // call token -> the call in flight
	// requestIDs are the agent.update request ids this run applied.
	requestIDs map[string]bool
	// children are the run hosts of the children this run started.
	children map[string]*exec.Cmd
	// policyText is what writePolicy last wrote to /mnt/proc/policy.
	policyText string
	// initPid is the run's init, once started.
	initPid atomic.Int64
	slots   chan struct{}
	static  []string // /mnt/proc/policy lines that are not about tools
	// watch is the policy watch, from policyWatchDelay into the run on
	// (nil before, and after closeBroker); under cacheMu.
	watch        *fsops.DirWatch
	watchTimer   *time.Timer
	watchOnce    sync.Once
	watchStopped bool
	// cache is decide's reading of the tree, dropped on every change the
	// watch reports; pending is a change the policy refresher has yet to
	// act on.
	cacheMu sync.Mutex
	cache   *decideCache
	pending bool
}

// startBroker binds the broker socket in the run directory and makes the
// order channel. Without it (a path too long for a socket, an old kernel)
// the run goes on with tools executing in the caller's process, and
// /mnt/proc/policy says so.
func (r *agentRun) startBroker(static []string) error {
	path := filepath.Join(r.runDir, fsops.BrokerSocketName)
	fd, err := fsops.ListenBroker(path)
	if err != nil {
		return err
	}
	host, init, err := fsops.NewBrokerChannel()
	if err != nil {
		fsops.CloseFD(fd)
		return err
	}
	r.broker = &broker{r: r, listen: fd, host: host, init: init,
		waiting: map[uint64]chan fsops.BrokerOrder{}, calls: map[string]*brokerCall{}, slots: make(chan struct{}, maxBrokerCalls), static: static}
	go r.broker.readInit()
	go r.broker.serve()
	r.broker.watchPolicy()
	return nil
}

// closeBroker stops accepting calls and closes the order channel.
func (r *agentRun) closeBroker() {
	if b := r.broker; b != nil {
		fsops.CloseBrokerListener(b.listen)
		b.host.Close()
		b.stopWatch()
		if b.init != nil {
			b.init.Close()
		}
	}
}

// descendsFrom reports whether pid is ancestor or lies below it (walking
// the parent chain in /proc; bounded).
func descendsFrom(pid, ancestor int) bool {
	if pid <= 0 || ancestor <= 0 {
		return false
	}
	for i := 0; i < 256 && pid > 1; i++ {
		if pid == ancestor {
			return true
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 {
			return false
		}
		if pid, err = strconv.Atoi(f[1]); err != nil {
			return false
		}
	}
	return false
}

// sandboxStarted drops the host's copy of the init's end.
func (b *broker) sandboxStarted() {
	if b.init != nil {
		b.init.Close()
		b.init = nil
	}
}

func (b *broker) serve() {
	for {
		conn, err := fsops.AcceptBroker(b.listen)
		if err != nil {
			return
		}
		select {
		case b.slots <- struct{}{}:
			go func() {
				defer func() { <-b.slots }()
				b.handle(conn)
			}()
		default:
			fsops.SendBrokerMessage(conn, fsops.BrokerReply{Exit: exitUnavailable, Error: "too many tool calls in flight"}, nil)
			fsops.CloseFD(conn)
		}
	}
}

// readInit dispatches the init's exit reports to the calls waiting.
func (b *broker) readInit() {
	for {
		var o fsops.BrokerOrder
		files, err := fsops.RecvBrokerMessage(int(b.host.Fd()), &o, 0)
		for _, f := range files {
			f.Close()
		}
		if err == fsops.ErrBrokerClosed || err == unix.EBADF {
			b.mu.Lock()
			for id, ch := range b.waiting {
				ch <- fsops.BrokerOrder{Op: "exit", ID: id, Status: exitUnavailable, Error: "the sandbox is gone"}
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		if err != nil || o.Op != "exit" {
			continue
		}
		b.mu.Lock()
		ch, ok := b.waiting[o.ID]
		delete(b.waiting, o.ID)
		b.mu.Unlock()
		if ok {
			ch <- o
		}
	}
}

// handle serves one call from request to reply. Every call, allowed,
// refused or failed, leaves one tool.call event written by the host.
func (b *broker) handle(conn int) {
	defer fsops.CloseFD(conn)
	began := time.Now()
	// A caller has requestTimeout to send its request: a connection that
	// says nothing does not hold one of the run's call slots for long.
	fsops.SetBrokerRecvTimeout(conn, requestTimeout)
	var req fsops.BrokerRequest
	files, err := fsops.RecvBrokerMessage(conn, &req, 3)
	fsops.SetBrokerRecvTimeout(conn, 0)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		fsops.SendBrokerMessage(conn, fsops.BrokerReply{Exit: exitUsage, Error: err.Error()}, nil)
		return
	}
	if req.Report != nil {
		b.takeReport(req.Report)
		fsops.SendBrokerMessage(conn, fsops.BrokerReply{}, nil)
		return
	}
	if req.HostOp != nil {
		fsops.SendBrokerMessage(conn, b.hostOperation(req.HostOp), nil)
		return
	}
	pid, peerUID := 0, -1
	if p, u, err := fsops.BrokerPeer(conn); err == nil {
		pid, peerUID = p, u
	}
	// In iso landlock the socket is a host path: another agent running as
	// the same uid (a user's tree) could reach it where Landlock does not
	// guard unix sockets (before ABI 9). Only the run's own processes, the
	// descendants of its init, are served.
	// The person who started the run (ctx run from the host) is served
	// too where no agent can share their uid: a root caller's agents run
	// as uids of their own.
	fromRun := b.r.iso != policy.IsoLandlock || descendsFrom(pid, int(b.initPid.Load()))
	if req.Join != nil {
		b.join(conn, req.Join, files, pid, peerUID)
		return
	}
	if !fromRun && !(peerUID == b.r.callerUID && uint32(b.r.callerUID) != b.r.agent.UID) {
		fsops.SendBrokerMessage(conn, fsops.BrokerReply{Exit: exitDenied, Error: "the broker serves only the processes of its own run"}, nil)
		return
	}
	ev := fsops.Event{Type: "tool.call", Object: "tool/" + req.Tool, PID: pid}
	token := ""
	reply := func(exit int, msg string) {
		ev.Exit = &exit
		if token != "" {
			b.mu.Lock()
			if c := b.calls[token]; c != nil && c.report != nil {
				ev.Errno, ev.Layer, ev.Detail = c.report.Errno, c.report.Layer, c.report.Detail
			}
			delete(b.calls, token)
			b.mu.Unlock()
		}
		ev.DurMS = float64(time.Since(began).Microseconds()) / 1000
		if ev.Status == "" {
			switch {
			case exit == 0:
				ev.Status = "ok"
			case exit == exitDenied:
				ev.Status = "denied"
			case ev.Errno == "ETIMEDOUT":
				ev.Status = "timeout" // the tool's own limit (tool_timeout_s)
			case ev.Errno == "ECANCELED":
				ev.Status = "cancelled"
			default:
				ev.Status = "error"
			}
		}
		b.r.recordEvent(ev)
		fsops.SendBrokerMessage(conn, fsops.BrokerReply{Exit: exit, Error: msg}, nil)
	}
	if policy.ValidName(req.Tool) != nil || (len(files) != 3 && req.Decide == nil) {
		ev.Object = "tool/-"
		reply(exitUsage, "a broker request names a valid tool and passes three descriptors")
		return
	}
	dec := b.decide(req.Tool)
	path, warm := dec.path, dec.warm
	if path == "" {
		ev.Errno, ev.Layer = "EACCES", dec.layer
		exit := exitDenied
		if dec.layer == "" {
			ev.Errno, exit = "ENOENT", exitNotFound
		}
		reply(exit, fmt.Sprintf("%s: %s", req.Tool, dec.why))
		return
	}
	// Fail closed: a call the host cannot record is not run. Its refusal
	// is not written either once the log budget is spent (the budget's
	// own event says so, once).
	if err := b.canRecord(); err != nil {
		ev.Errno = "ENOSPC"
		reply(exitUnavailable, fmt.Sprintf("%s: refused: %v", req.Tool, err))
		return
	}
	// A program that is not ctx does not check its input against its
	// schema itself: given one JSON object, the host does, before it runs
	// (ctx's own tools and MCP-projected ones validate their input).
	if err := dec.validate(req.Args); err != nil {
		ev.Errno = "EINVAL"
		reply(exitUsage, fmt.Sprintf("%s: EINVAL: %v", req.Tool, err))
		return
	}
	if d := req.Decide; d != nil {
		// Allowed, but the caller runs it (a terminal tool) or has
		// refused it itself: recorded from this decision, not run here.
		if t, ok := builtinTools[req.Tool]; ok && t.Passthrough && d.Terminal {
			ev.Status, ev.Detail = "started", "a terminal tool: it runs in the caller's process, its exit is not observed"
			reply(exitOK, "")
			return
		}
		ev.Status, ev.Errno, ev.Layer, ev.Detail = "denied", "EACCES", "caller", "refused by the caller before it ran"
		reply(exitDenied, fmt.Sprintf("%s: refused by the caller", req.Tool))
		return
	}

	var rnd [16]byte
	if err := fsops.RandomBytes(rnd[:]); err != nil {
		reply(exitInternal, "no entropy for the call's token")
		return
	}
	token = hex.EncodeToString(rnd[:])
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	done := make(chan fsops.BrokerOrder, 1)
	b.waiting[id] = done
	b.calls[token] = &brokerCall{tool: req.Tool}
	b.mu.Unlock()
	cwd := req.Cwd
	if b.r.iso == policy.IsoLandlock && within(cwd, policy.SandboxWorkspace) {
		// A caller outside the run (ctx run from the host) names the
		// sandbox's workspace; a landlock run has only the host's path.
		cwd = b.r.workspace + strings.TrimPrefix(cwd, policy.SandboxWorkspace)
	}
	env := brokerEnv(req.Env)
	if !fromRun {
		// The person's call into a landlock run: the run's own environment,
		// whose paths are the host's (a caller outside names the sandbox's).
		env = b.r.env
	}
	order := fsops.BrokerOrder{Op: "exec", ID: id, Path: path, Argv: append([]string{req.Tool}, req.Args...),
		Env: env, Cwd: cwd, Token: token, Warm: warm}
	if warm && !dec.builtin {
		// An MCP-projected tool finds its control directory beside the
		// path it runs as (applets/mcptool.go), not beside the worker's
		// binary.
		order.Argv[0] = path
	}
	if dec.hooked && b.r.plan.Worker != "" {
		// A tool that is not a builtin has its pre and post hooks run
		// around it by ctx (hooked_tool.go), as a builtin runs its own.
		order.Path = b.r.plan.Worker
		order.Argv = append([]string{hookedToolApplet, req.Tool, path}, req.Args...)
	}
	fds := []int{int(files[0].Fd()), int(files[1].Fd()), int(files[2].Fd())}
	if err := fsops.SendBrokerMessage(int(b.host.Fd()), order, fds); err != nil {
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
		reply(exitUnavailable, fmt.Sprintf("%s: the sandbox cannot take the call: %v", req.Tool, err))
		return
	}
	for _, f := range files {
		f.Close()
	}
	files = nil

	o, cancelled := b.await(conn, id, done)
	switch {
	case cancelled:
		ev.Status = "cancelled"
		reply(o.Status, "")
	case o.Error != "":
		reply(o.Status, fmt.Sprintf("%s: %s", req.Tool, o.Error))
	default:
		reply(o.Status, "")
	}
}

// await waits for the init's report of order id on done. The caller going
// away first (Ctrl-C, a kill, an MCP cancel closing conn) cancels it: the
// init kills the order's whole process group, and the report that it has
// ended (or, after cancelWait, a SIGKILL status) is returned with
// cancelled true.
func (b *broker) await(conn int, id uint64, done chan fsops.BrokerOrder) (o fsops.BrokerOrder, cancelled bool) {
	gone := make(chan struct{})
	go func() {
		fsops.AwaitBrokerHangup(conn)
		close(gone)
	}()
	select {
	case o := <-done:
		return o, false
	case <-gone:
		fsops.SendBrokerMessage(int(b.host.Fd()), fsops.BrokerOrder{Op: "kill", ID: id}, nil)
		select {
		case o := <-done:
			o.Error = ""
			return o, true
		case <-time.After(cancelWait):
			return fsops.BrokerOrder{Op: "exit", ID: id, Status: cli.Signaled(unix.SIGKILL)}, true
		}
	}
}

// maxJoinArgs bounds the argv of a program joining a run.
const maxJoinArgs = 1024

// join starts a program in this run for a caller outside it: a second ctx
// agent start (or MCP server) for the running agent. The program runs as
// the agent's own program does (its environment, working directory, uid
// and walls), with the caller's descriptors, in a process group of its
// own; the run lasts until it has ended too. Closing the connection ends
// it. One agent.join event records it, with its exit.
func (b *broker) join(conn int, j *fsops.BrokerJoin, files []*os.File, pid, peerUID int) {
	began := time.Now()
	ev := fsops.Event{Type: "agent.join", Object: "agent/" + b.r.agent.Name, PID: pid}
	reply := func(exit int, msg string) {
		ev.Exit = &exit
		ev.DurMS = float64(time.Since(began).Microseconds()) / 1000
		if ev.Status == "" {
			ev.Status = "ok"
			if exit != 0 {
				ev.Status = "error"
			}
		}
		b.r.recordEvent(ev)
		fsops.SendBrokerMessage(conn, fsops.BrokerReply{Exit: exit, Error: msg}, nil)
	}
	switch {
	case descendsFrom(pid, int(b.initPid.Load())):
		// A process of the run starts programs itself; one joined would
		// keep the run alive past its program.
		ev.Status = "denied"
		reply(exitDenied, "a program joins a run from outside it (ctx agent start on the host)")
		return
	case peerUID != b.r.callerUID && peerUID != 0:
		ev.Status = "denied"
		reply(exitDenied, "only the user who started the run, or root, may join it")
		return
	case b.r.iso == policy.IsoLandlock && peerUID != 0 && uint32(peerUID) == b.r.agent.UID:
		// The socket is a host path: a process of another run of the
		// same uid (another agent of this user) could ask too, and
		// nothing tells it from the person.
		ev.Status = "denied"
		reply(exitDenied, "an iso landlock run of an agent with its user's uid cannot be joined: nothing tells that user from another agent of the same uid")
		return
	case len(files) != 3 || len(j.Argv) == 0 || len(j.Argv) > maxJoinArgs:
		reply(exitUsage, "a join names a program and passes three descriptors")
		return
	}
	ev.Detail = "program " + j.Argv[0] // bounded by the event's line builder
	var env []string
	for _, kv := range b.r.env {
		if !strings.HasPrefix(kv, "CTX_RUN_FD=") {
			env = append(env, kv)
		}
	}
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	done := make(chan fsops.BrokerOrder, 1)
	b.waiting[id] = done
	b.mu.Unlock()
	order := fsops.BrokerOrder{Op: "run", ID: id, Argv: j.Argv, Env: env, Cwd: b.r.plan.Cwd}
	fds := []int{int(files[0].Fd()), int(files[1].Fd()), int(files[2].Fd())}
	if err := fsops.SendBrokerMessage(int(b.host.Fd()), order, fds); err != nil {
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
		reply(exitUnavailable, fmt.Sprintf("the sandbox cannot take the program: %v", err))
		return
	}
	for _, f := range files {
		f.Close()
	}
	o, cancelled := b.await(conn, id, done)
	if cancelled {
		ev.Status = "cancelled"
	}
	reply(o.Status, o.Error)
}

// takeReport keeps what a brokered tool reported for its call, bounded,
// if the token names a call in flight; anything else is dropped.
func (b *broker) takeReport(rep *fsops.BrokerReport) {
	bound := func(s string, n int) string {
		if len(s) > n {
			return s[:n]
		}
		return s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.calls[rep.Token]; ok && c.report == nil {
		c.report = &fsops.BrokerReport{Errno: bound(rep.Errno, 32), Layer: bound(rep.Layer, 64), Detail: bound(rep.Detail, 512)}
	}
}

// decision is the host's answer to one call, with what it found of the
// tool, read once.
type decision struct {
	path       string // the tool's file as the init finds it; "" when refused
	layer, why string // a refusal's layer ("" for not found) and reason
	warm       bool   // a warm worker runs it
	builtin    bool   // a builtin tool applet in the run's ctx binary
	hooked     bool   // ctx-hooked-tool runs its hooks around it
	thirdParty bool   // a program that is not ctx
	ctl        string // its control directory (host path)
}

// decide checks tool against the agent's controls, policy and the tool
// tiers as they are on disk now (a grant revoked during the run refuses
// the next call; /mnt/proc/policy is refreshed before a refusal is
// answered), and says how the allowed call is run: in a warm worker (a
// builtin, or an MCP-projected tool, a link of ctx, without hooks), through
// ctx-hooked-tool (any other tool with hooks), or executed.
func (b *broker) decide(tool string) decision {
	r := b.r
	a, hit, tier, found, err := b.lookupTool(tool)
	if err != nil {
		return decision{layer: "agent-context", why: "the agent's controls cannot be read: " + err.Error()}
	}
	if found && authority.CheckHit(a, authority.View(r.root, a), hit).Allowed {
		t := policy.ProjectedTool{Name: hit.Name, Tier: tier, HostPath: hit.Path}
		if projectedAtStart(r, t) {
			d := decision{path: t.Tier + "/" + t.Name, ctl: hit.ControlDir}
			if r.iso == policy.IsoLandlock {
				d.path = t.HostPath // no mounts: the host's own path
			}
			ctx := isCtxFile(r, t.HostPath)
			applet, isApplet := lookup(tool)
			d.builtin = ctx && isApplet && applet.Tool
			d.thirdParty = !ctx
			d.hooked = !d.builtin && hasHooks(hit.ControlDir) // a builtin runs its own (tool.go)
			d.warm = r.plan.Worker != "" && ctx && !d.hooked
			return d
		}
	}
	// Refused: the whole projection says why, and /mnt/proc/policy is
	// brought up to date before the caller hears of it.
	tools, lines := projectTools(r.root, a)
	b.writePolicy(lines)
	for _, t := range tools {
		if t.Name == tool && !projectedAtStart(r, t) {
			return decision{layer: "mount-visibility", why: "granted since the run started; it reaches the sandbox at the next start"}
		}
	}
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "tool:"+tool+" execute rejected "); ok {
			return decision{layer: rest, why: "permission denied (" + rest + ")"}
		}
	}
	return decision{why: "tool not found"}
}

// validate checks the input of a call of a third-party tool against its
// schema control when the call's input is one JSON object argument (input
// on standard input is the program's to read, and is not seen here): a
// program that is not ctx does not check it itself.
func (d decision) validate(args []string) error {
	if !d.thirdParty || len(args) != 1 || !strings.HasPrefix(strings.TrimSpace(args[0]), "{") {
		return nil
	}
	return validateToolInput(d.ctl, json.RawMessage(args[0]))
}

// refreshPolicy rewrites /mnt/proc/policy from the tree as it is now.
// watchPolicy runs it whenever a control changes; a refused call, before
// its answer.
func (b *broker) refreshPolicy() {
	a, err := authority.LoadAgent(b.r.root, b.r.agent.Name)
	if err != nil {
		return
	}
	_, lines := projectTools(b.r.root, a)
	b.writePolicy(lines)
}

// policyIgnored are entries of watched directories that the tree writes
// as it runs and that decide nothing: their changes do not rewrite
// /mnt/proc/policy.
var policyIgnored = map[string]bool{"log": true, "status": true, "pid": true, ".policy.tmp": true}

// policyWatchDelay is how long a run goes before its policy watch starts.
// Until then every decision reads the tree afresh (a cost of about 0.5 ms
// per call) and /mnt/proc/policy is rewritten only on refusals. Why: the
// kernel ends an inotify instance only after a grace period (an SRCU
// synchronisation behind the mark reaper, 5-20 ms here), which the run
// host pays when it closes the watch or exits; a short run (ctx agent
// start A -- cmd, a one-shot MCP call) gains nothing from a watch and was
// paying that on every start.
const policyWatchDelay = 100 * time.Millisecond

// watchPolicy keeps /mnt/proc/policy in step with the tree for the life of
// the run: every change to the controls it is computed from (the agents'
// control directories, the tool tiers and their tools' control
// directories, the shared spaces, and every directory above those) rewrites
// it, a short moment later so that a burst of changes is one rewrite. The
// same watch tells decide whether what it read for the last call still
// stands (b.changed). It starts policyWatchDelay into the run.
func (b *broker) watchPolicy() {
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	b.watchTimer = time.AfterFunc(policyWatchDelay, b.startWatch)
}

func (b *broker) startWatch() {
	b.watchOnce.Do(func() {
		w, err := fsops.NewDirWatch()
		if err != nil {
			return
		}
		w.AddWithAncestors(b.r.root.Dir, b.policyDirs()...)
		b.cacheMu.Lock()
		if b.watchStopped {
			b.cacheMu.Unlock()
			w.Close()
			return
		}
		// What was read before the watch held may be stale already: the
		// next decision reads again, and the policy is rewritten once.
		b.watch, b.cache, b.pending = w, nil, true
		b.cacheMu.Unlock()
		go func() {
			for first := true; first || w.Wait(1000); first = false {
				if !b.changed() {
					continue
				}
				time.Sleep(20 * time.Millisecond)
				b.changed() // the rest of a burst
				b.refreshPolicy()
				w.AddWithAncestors(b.r.root.Dir, b.policyDirs()...) // directories made since
			}
		}()
	})
}

// stopWatch ends the policy watch, or keeps it from starting.
func (b *broker) stopWatch() {
	b.cacheMu.Lock()
	b.watchStopped = true
	if b.watchTimer != nil {
		b.watchTimer.Stop()
	}
	w := b.watch
	b.cacheMu.Unlock()
	if w != nil {
		w.Close()
	}
}

// changed consumes the watch's queued changes and reports whether the tree
// changed since the last call (or a decide saw a change the refresher has
// not acted on yet); it drops decide's cached reading either way.
func (b *broker) changed() bool {
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	if b.watch.Changed(policyIgnored) {
		b.cache = nil
		b.pending = true
	}
	c := b.pending
	b.pending = false
	return c
}

// lookupTool finds tool for the calling agent: its controls and its
// trusted tool path as the tree is now, read again after any change the
// watch reports (or when the watch is incomplete), else the reading of the
// last call. Changes are queued by the kernel before the write that makes
// them returns, so a decision never uses a reading older than a completed
// change. tier is the hit's tier as the agent's path names it; found is
// false when no trusted tool of that name is on the path.
func (b *broker) lookupTool(tool string) (a *policy.Agent, hit fsops.ToolHit, tier string, found bool, err error) {
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	if b.watch == nil || !b.watch.Complete() || b.watch.Changed(policyIgnored) {
		b.cache = nil
		b.pending = true
	}
	if b.cache == nil {
		a, err := authority.LoadAgent(b.r.root, b.r.agent.Name)
		if err != nil {
			return nil, hit, "", false, err
		}
		b.cache = &decideCache{agent: a, path: authority.TrustedToolDirs(b.r.root, a)}
	}
	// Under the lock: the trust rule's verdicts are kept in the reading.
	hit, lerr := b.cache.path.Lookup(tool)
	if lerr != nil {
		return b.cache.agent, hit, "", false, nil
	}
	return b.cache.agent, hit, b.cache.path.TierOf(hit.Dir), true, nil
}

// decideCache is what decide read from the tree for the last call.
type decideCache struct {
	agent *policy.Agent
	path  authority.ToolPath
}

// policyDirs are the directories /mnt/proc/policy is computed from.
func (b *broker) policyDirs() []string {
	root := b.r.root
	dirs := []string{root.AgentDir(), root.Path("shared")}
	withControls := func(dir string) {
		dirs = append(dirs, dir)
		entries, _ := os.ReadDir(dir)
		for _, en := range entries {
			if en.IsDir() && strings.HasSuffix(en.Name(), ".d") {
				dirs = append(dirs, filepath.Join(dir, en.Name()))
			}
		}
	}
	withControls(root.AgentDir())
	withControls(root.Path("shared"))
	for _, tier := range authority.ToolDirs(root, b.r.agent) {
		withControls(tier)
	}
	return dirs
}

// canRecord says why the host could not record a call now: the run's
// log_bytes budget is spent, or the session's events file cannot be
// appended to.
func (b *broker) canRecord() error {
	if b.r.logSpent() {
		return fmt.Errorf("the run's log budget (log_bytes) is spent: tool calls are not run unrecorded")
	}
	if b.r.sess.Events != "" {
		if err := fsops.CheckAppendable(b.r.sess.Events); err != nil {
			return fmt.Errorf("the session's events cannot be written (%v): tool calls are not run unrecorded", err)
		}
	}
	return nil
}

// workerPath is the run's ctx binary as the init finds it (inside), which
// it starts warm tool workers from, or "" for a run without a broker.
func (r *agentRun) workerPath(inside string) string {
	if r.broker == nil {
		return ""
	}
	return inside
}

// isCtxFile reports whether file is the run's own ctx binary (a builtin
// tool's file, or an MCP-projected tool's hard link of it).
func isCtxFile(r *agentRun, file string) bool {
	return fsops.SameInode(r.root.Path("bin", "ctx"), file)
}

// projectedAtStart reports whether t was mounted into the sandbox when the
// run started (only those files exist inside).
func projectedAtStart(r *agentRun, t policy.ProjectedTool) bool {
	for _, p := range r.tools {
		if p.Name == t.Name && p.Tier == t.Tier {
			return true
		}
	}
	return false
}

// writePolicy replaces /mnt/proc/policy with the tool lines of the latest
// decision and the run's other lines.
func (b *broker) writePolicy(toolLines []string) {
	lines := append(append([]string(nil), toolLines...), b.static...)
	sort.Strings(lines)
	text := strings.Join(lines, "\n") + "\n"
	// One writer at a time, and only when the decision changed: calls run
	// concurrently, and most find the policy as the last one left it.
	b.mu.Lock()
	defer b.mu.Unlock()
	if text == b.policyText {
		return
	}
	tmp := filepath.Join(b.r.runDir, ".policy.tmp")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err == nil && os.Rename(tmp, filepath.Join(b.r.runDir, "policy")) == nil {
		b.policyText = text
	}
}

// brokerEnv bounds the caller's environment passed to the tool and drops
// the brokered marker, which only the init sets.
func brokerEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, fsops.BrokeredEnv+"=") || strings.IndexByte(kv, 0) >= 0 {
			continue
		}
		if len(out) == 1024 {
			break
		}
		out = append(out, kv)
	}
	return out
}
