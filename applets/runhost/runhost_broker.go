package runhost

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/fsops/proc"
	"ctx/fsops/sandbox"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// Broker is the run host's side of the tool broker (fsops/broker/broker.go): it
// accepts calls on the socket /mnt/proc shows, decides each against the
// tree as it is on disk at that moment, has the sandbox's init run it, and
// records it. The init's side is fsops/sandbox/initbroker.go.
type Broker struct {
	R      *AgentRun
	listen *broker.Listener
	host   *os.File // the host's end of the order channel
	init   *os.File // the init's end, until the sandbox has it

	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]chan broker.InitReport
	// requestIDs are the agent.update request ids this run applied.
	requestIDs map[string]bool
	// children are the run hosts of the children this run started.
	children map[string]*exec.Cmd
	// policyText is what writePolicy last wrote to /mnt/proc/policy, and
	// policyFile that file, fixed at the broker's start (the run's end
	// clears the run's own field while a refresh may be late).
	policyText, policyFile string
	// initPid is the run's init, once started.
	initPid atomic.Int64
	// inFlight are the calls admitted and not yet recorded, each with
	// room reserved for its record.
	inFlight atomic.Int64
	gated    atomic.Bool // the unix gate is served (iso landlock)
	// connector brings the init's answer to the gate's one request for its
	// connector: the connector's channel and pidfd, or none.
	connector chan []*os.File
	gate      brokerGate // pending handshakes and call slots, by peer (runhost_broker_peers.go)
	static    []string   // /mnt/proc/policy lines that are not about tools
	// handlers counts the connections being served, idle hands one to a
	// handler waiting for it; readDone is closed when readInit has
	// returned; stopListen closes the listener once.
	handlers   sync.WaitGroup
	idle       chan brokerConn
	readDone   chan struct{}
	stopListen sync.Once
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
	// policyGen counts the changes the watch reported (noteChangeLocked).
	policyGen uint64
}

// startBroker binds the broker socket in the run directory and makes the
// order channel. Without it (a path too long for a socket, an old kernel)
// the run goes on with tools executing in the caller's process, and
// /mnt/proc/policy says so.
func (r *AgentRun) startBroker(static []string) error {
	path := filepath.Join(r.runDir, broker.SocketName)
	l, err := broker.Listen(path)
	if err != nil {
		return err
	}
	host, init, err := broker.NewOrderChannel()
	if err != nil {
		l.Close()
		return err
	}
	r.broker = &Broker{R: r, listen: l, host: host, init: init, readDone: make(chan struct{}), idle: make(chan brokerConn),
		policyFile: filepath.Join(r.runDir, "policy"),
		waiting:    map[uint64]chan broker.InitReport{}, gate: newBrokerGate(), static: static,
		connector: make(chan []*os.File, 1)}
	go r.broker.readInit()
	go r.broker.serve()
	r.broker.watchPolicy()
	return nil
}

// closeBroker stops accepting calls and closes the order channel.
func (r *AgentRun) closeBroker() {
	if b := r.broker; b != nil {
		b.stopListening()
		b.host.Close()
		b.stopWatch()
		if b.init != nil {
			b.init.Close()
		}
	}
}

// stopListening closes the listener, once: no call starts after it.
func (b *Broker) stopListening() {
	b.stopListen.Do(func() { b.listen.Close() })
}

// settleBroker lets the calls in flight when the run ended have their
// answers before the run is recorded as over and the run host exits. The
// init reported their exits (a joined program's among them) before it
// reported the end, on the order channel, where they may wait unread by
// a readInit not yet scheduled: the channel's closing would have answered
// them "the sandbox is gone", and the host's exit taken the reply away.
// Shutting its reading side down lets readInit take what is queued and
// then stop; each handler then replies. Both waits are bounded.
func (r *AgentRun) settleBroker() {
	b := r.broker
	if b == nil {
		return
	}
	b.stopListening()
	b.gate.dropPending() // a connection that never spoke is not waited for
	broker.StopReads(b.host)
	settled := make(chan struct{})
	go func() {
		<-b.readDone
		b.handlers.Wait()
		close(settled)
	}()
	select {
	case <-settled:
	case <-time.After(settleWait):
	}
}

// settleWait bounds how long a run's end waits for its last calls' answers.
const settleWait = 2 * time.Second

// sandboxStarted drops the host's copy of the init's end.
func (b *Broker) sandboxStarted() {
	if b.init != nil {
		b.init.Close()
		b.init = nil
	}
}

// startUnixGate answers the connects of an iso landlock run (the init
// sent the gate's listener): a connection the gate makes to the broker is
// served as one from the process that asked for it; sockets in the places
// the run may write are its own. Only the first listener is taken.
func (b *Broker) startUnixGate(listener *os.File) {
	if !b.gated.CompareAndSwap(false, true) || b.R.plan == nil {
		listener.Close()
		return
	}
	rules := sandbox.UnixGateRules{
		Broker:  filepath.Join(b.R.runDir, broker.SocketName),
		Network: networkGranted(b.R.Agent),
		Proxy:   b.R.net.LandlockProxy(),
		Hand: func(conn, pid int) {
			p := brokerPeer{pid: pid, uid: -1, inside: proc.Descends(pid, int(b.initPid.Load()))}
			if u, err := fsops.ProcessUID(pid); err == nil {
				p.uid = u
			}
			b.enter(conn, p)
		},
		StartConnector: b.startConnector,
	}
	abi, _ := sandbox.LandlockABI()
	rules.Abstract = abi >= sandbox.LandlockABIScope
	for _, a := range b.R.plan.Access {
		if a.Write {
			if real, err := filepath.EvalSymlinks(a.Path); err == nil {
				rules.Writable = append(rules.Writable, real)
			}
		}
	}
	sandbox.ServeUnixGate(listener, rules)
}

// startConnector has the init start the unix gate's connector (the gate
// asks once, at the first connect it needs it for) and returns its
// channel and pidfd.
func (b *Broker) startConnector() (ch, pidfd *os.File, err error) {
	if err := broker.Send(int(b.host.Fd()), broker.Order{Op: broker.OpConnector}, nil); err != nil {
		return nil, nil, err
	}
	select {
	case files := <-b.connector:
		if len(files) != 2 {
			closeFiles(files)
			return nil, nil, errors.New("the init started no connector")
		}
		return files[0], files[1], nil
	case <-b.readDone:
		return nil, nil, errors.New("the sandbox is gone")
	}
}

// readInit dispatches the init's exit reports to the calls waiting.
func (b *Broker) readInit() {
	defer close(b.readDone)
	for {
		var o broker.InitReport
		files, err := broker.RecvFile(b.host, &o, 2)
		if err == nil && o.Op == broker.OpUnixGate && len(files) == 1 {
			b.startUnixGate(files[0])
			continue
		}
		if err == nil && o.Op == broker.OpListen {
			b.R.net.Listened(o.ID, o.Error, files) // a forwarder (applets/egress)
			continue
		}
		if err == nil && o.Op == broker.OpConnector {
			select {
			case b.connector <- files: // its answer, asked for once
				continue
			default:
			}
		}
		for _, f := range files {
			f.Close()
		}
		if err == broker.ErrClosed || err == unix.EBADF {
			b.mu.Lock()
			for id, ch := range b.waiting {
				ch <- broker.InitReport{Op: broker.OpExit, ID: id, Status: cli.Unavailable, Error: "the sandbox is gone"}
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		if err != nil || o.Op != broker.OpExit {
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

// decision is the host's answer to one call, with what it found of the
// tool, read once.
type decision struct {
	path       string // the tool's file as the init finds it; "" when refused
	layer, why string // a refusal's layer ("" for not found) and reason
	worker     bool   // ctx's own process runs it: a tool worker
	builtin    bool   // a builtin tool applet in the run's ctx binary
	hooked     bool   // ctx-hooked-tool runs its hooks around it
	thirdParty bool   // a program that is not ctx
	ctl        string // its control directory (host path)
}

// decide checks tool against the agent's controls, policy and the tool
// tiers as they are on disk now (a grant revoked during the run refuses
// the next call; /mnt/proc/policy is refreshed before a refusal is
// answered), and says how the allowed call is run: in a tool worker (a
// builtin, or an MCP-projected tool, a link of ctx: both run their own
// hooks; or ctx-hooked-tool around any other tool with hooks), or
// executed.
func (b *Broker) decide(tool string) decision {
	r := b.R
	a, hit, tier, found, err := b.lookupTool(tool)
	if err != nil {
		return decision{layer: "agent-context", why: "the agent's controls cannot be read: " + err.Error()}
	}
	if found && authority.CheckHit(a, authority.View(r.Root, a), hit).Allowed {
		t := sandboxplan.ProjectedTool{Name: hit.Name, Tier: tier, HostPath: hit.Path}
		if projectedAtStart(r, t) {
			d := decision{path: t.Tier + "/" + t.Name, ctl: hit.ControlDir}
			if r.iso == policy.IsoLandlock {
				d.path = t.HostPath // no mounts: the host's own path
			}
			ctx := isCtxFile(r, t.HostPath)
			applet, isApplet := cli.LookupApplet(tool)
			d.builtin = ctx && isApplet && applet.Tool
			d.thirdParty = !ctx
			ownHooks := ctx && (!isApplet || applet.Tool) // a builtin or MCP-projected tool runs its own (runTool)
			d.hooked = !ownHooks && toolrun.HasHooks(hit.ControlDir)
			d.worker = r.plan.Worker != "" && (ctx || d.hooked)
			return d
		}
	}
	// Refused: the whole projection says why, and /mnt/proc/policy is
	// brought up to date before the caller hears of it.
	tools, lines := projectTools(authority.NewAgents(r.Root, a), a)
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
	return toolrun.ValidateJSONInput(d.ctl, json.RawMessage(args[0]))
}

// workerPath is the run's ctx binary as the init finds it (inside), which
// it starts warm tool workers and ctx-hooked-tool from, or "" for a run
// without a broker.
func (r *AgentRun) workerPath(inside string) string {
	if r.broker == nil {
		return ""
	}
	return inside
}

// isCtxFile reports whether file is the run's own ctx binary (a builtin
// tool's file, or an MCP-projected tool's hard link of it).
func isCtxFile(r *AgentRun, file string) bool {
	return fsops.SameInode(r.Root.Path("bin", "ctx"), file)
}

// projectedAtStart reports whether t was mounted into the sandbox when the
// run started (only those files exist inside).
func projectedAtStart(r *AgentRun, t sandboxplan.ProjectedTool) bool {
	for _, p := range r.tools {
		if p.Name == t.Name && p.Tier == t.Tier {
			return true
		}
	}
	return false
}
