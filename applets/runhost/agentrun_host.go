package runhost

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/fsops/kept"
	"ctx/fsops/proc"
	fssandbox "ctx/fsops/sandbox"
)

// Hosting a run (ctx agent start, once prepared): the run host starts the
// sandbox's init (or the confined program), serves the run capability
// (a run without a broker only), forwards signals, watches the budgets,
// and records the end.

// run starts the program and hosts the run until it ends.
func (r *AgentRun) run(e *cli.Env) int {
	runcap, served, err := r.serveRunCapability(e)
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "run capability: %v", err)
	}
	defer runcap.Close()
	cmd, sandbox, code, ok := r.firstCommand(e, runcap)
	if !ok {
		return code
	}

	r.setStatus("start", os.Getpid())
	r.recordEvent(fsops.Event{Type: "agent.start", Object: "agent/" + r.Agent.Name, Status: "ok",
		Detail: fmt.Sprintf("iso=%s%s workspace=%s model=%s life=%s", r.iso, r.isoNote(), r.workspace, r.Agent.Model, r.Agent.Life) + r.protectEventNote() + r.chainEventNote()})

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)

	stopWatch := make(chan struct{})
	started := r.onStarted(e, sandbox, runcap, stopWatch, sigs)
	var status int
	if r.onTerminal {
		status = r.runOnTerminal(e, cmd, started)
		if cmd.Process != nil && cmd.ProcessState == nil {
			// Started early and never served (the terminal could not be
			// set up): it ends here, before the run is recorded as over.
			cmd.Process.Kill()
			cmd.Wait()
		}
	} else {
		// The caller's terminal or files reach the agent only as pipes.
		// An init started early has them already.
		if cmd.Process == nil {
			cmd.Stdin, cmd.Stdout, cmd.Stderr = lifecycle.ShieldInput(e.Stdin), lifecycle.ShieldOutput(e.Stdout), lifecycle.ShieldOutput(e.Stderr)
		}
		if err := r.startFirst(cmd); err != nil {
			runcap.CloseChild()
			status = cli.Fail(e, cli.Unavailable, "starting agent %s: %v", r.Agent.Name, err)
		} else {
			started(cmd.Process.Pid)
			var exited <-chan struct{}
			status, exited = r.awaitEnd(cmd, sandbox)
			// The sandbox's init is out of its cgroup before the cgroup
			// goes: its locked thread left it before it reported the end
			// (letInitJoinCgroup), or it has exited.
			defer func() {
				if !r.initJoins {
					<-exited
				}
				r.endBudgets()
			}()
		}
	}
	r.closeRun(e, runcap, stopWatch, served)
	r.finish(status)
	return status
}

// serveRunCapability makes and serves the run capability of a run
// without a broker (iso shared, a broker that could not be bound), on
// which its tools report their calls; served is closed once nothing holds
// it. A run with a broker has none (nil): its host records every call
// from what it decided and observed, and no agent process can send it an
// event.
func (r *AgentRun) serveRunCapability(e *cli.Env) (*broker.RunCapability, <-chan struct{}, error) {
	served := make(chan struct{})
	if r.broker != nil {
		close(served)
		return nil, served, nil
	}
	runcap, err := broker.NewRunCapability()
	if err != nil {
		return nil, nil, err
	}
	go func() {
		defer close(served)
		runcap.Serve(authority.MaxRunMessage, func(pid int, msg []byte, ack *os.File) {
			err := r.handleRunMessage(pid, msg)
			broker.Acknowledge(ack, err == nil)
			if err != nil {
				cli.Errorf(e.Stderr, "ctx agent", "run capability: %v", err)
			}
		})
	}()
	return runcap, served, nil
}

// closeRun is what comes between the program's end and the stop's
// record: the run capability and the watches closed, the sub-agents
// ended, the budgets' last look, the last events awaited.
func (r *AgentRun) closeRun(e *cli.Env, runcap *broker.RunCapability, stopWatch chan struct{}, served <-chan struct{}) {
	runcap.CloseChild()
	close(stopWatch)
	r.endMu.Lock() // a kill under way finishes first
	r.ended = true
	r.endMu.Unlock()
	if r.initProc != nil {
		r.initProc.Close()
	}
	r.settleBroker()
	r.closeNetwork() // its last records before the stop's
	r.endChildren()
	r.endDisk()
	if r.initJoins {
		// The init's thread left the cgroup before it reported the end:
		// the last look at the budgets (a hit is recorded before the
		// stop) and the cgroup's removal come now, once.
		r.endBudgets()
	} else {
		r.checkCgroup(nil) // a budget hit is recorded before the stop
	}
	// Every holder of the run capability is gone with the sandbox; wait
	// for the last events before recording the stop.
	select {
	case <-served:
	case <-time.After(2 * time.Second):
	}
	r.warnProtect(e)
}

// awaitEnd waits for the end of the run started as cmd and returns the
// program's status, and a channel closed once cmd has exited and been
// reaped. A sandbox's init reports the status once every process of the
// run has ended (sandbox.Sandbox.Ended), before it exits itself: the run
// host records the end while the kernel tears the sandbox's namespaces
// down instead of after.
func (r *AgentRun) awaitEnd(cmd *exec.Cmd, sandbox *fssandbox.Sandbox) (int, <-chan struct{}) {
	exited := make(chan struct{})
	var waited int
	go func() {
		defer close(exited)
		waited = waitStatus(cmd.Wait())
	}()
	if sandbox != nil {
		select {
		case st, ok := <-sandbox.Ended():
			if ok {
				return st, exited
			}
		case <-exited:
			return waited, exited
		}
	}
	<-exited
	return waited, exited
}

// letInitJoinCgroup hands the init the tasks files of the run's cgroup
// and of its parent (cgroup v1), for the thread that starts every process
// of the run to join the cgroup itself, and to leave it once they have all
// ended, before the init reports the end: the run host then removes the
// cgroup without waiting for the init's exit, which every start waited
// for (fsops/sandbox/cgroup_thread.go). Without them (cgroup v2, no
// cgroup) the init is born inside or moved in, as before.
//
// It is called for each init a run prepares: an early init that could not
// start, or whose plan it could not take (abandoned), is replaced by one
// prepared later, which gets tasks files of its own; the state is always
// the last init's, so no init is ever started as if it joined when it
// was not given the files to.
func (r *AgentRun) letInitJoinCgroup(sb *fssandbox.Sandbox) {
	r.dropCgroupJoin()
	cg := r.budgets.cgroup
	if cg == nil || sb.Cmd.Process != nil {
		return
	}
	files, err := cg.ThreadTasksFiles()
	if err != nil || len(files) == 0 {
		return
	}
	sb.SetCgroupTasks(files)
	r.cgTasks, r.joinCmd, r.initJoins = files, sb.Cmd, true
}

// dropCgroupJoin forgets the tasks files handed to an init (closing the
// run host's copies): it has started with them, failed to, or was
// abandoned.
func (r *AgentRun) dropCgroupJoin() {
	closeFiles(r.cgTasks)
	r.cgTasks, r.joinCmd, r.initJoins = nil, nil, false
}

// firstCommand is the run's first process, not yet started: the
// sandbox's init with the plan (sandbox), or, without a plan (iso
// shared), the program behind ctx's confining trampoline.
func (r *AgentRun) firstCommand(e *cli.Env, runcap *broker.RunCapability) (*exec.Cmd, *fssandbox.Sandbox, int, bool) {
	if r.plan != nil {
		sandbox := r.takeEarly()
		if code, ok := r.recheckMode(e); !ok {
			return nil, nil, code, false
		}
		if sandbox == nil {
			var err error
			if sandbox, err = fssandbox.New(r.plan); err != nil {
				return nil, nil, cli.Fail(e, cli.Unavailable, "%v", err), false
			}
			r.letInitJoinCgroup(sandbox)
		}
		if runcap != nil {
			// Without a broker tools report their calls over the run
			// capability; a run with one has none.
			sandbox.SetRunFile(runcap.Child)
		}
		if r.idmapTree != nil {
			sandbox.SetIDMappedWorkspace(r.idmapTree)
		}
		if r.plan.HasTemplate() {
			// The kept template of this plan (ctx man sandbox, MODES), or none.
			if t, err := kept.Template(r.plan, filepath.Dir(r.runtime), r.treeKey, r.Root.Dir, r.Agent.Name); err == nil {
				r.tmplTree = t
				sandbox.SetTemplateTree(t)
			}
		}
		if r.broker != nil {
			sandbox.SetBrokerChannel(r.broker.init)
		}
		if r.net != nil && r.net.InitEnd() != nil {
			sandbox.SetEgressChannel(r.net.InitEnd())
		}
		r.sendEarly(sandbox)
		return sandbox.Cmd, sandbox, 0, true
	}
	// The program is looked up in the caller's PATH; not found, it
	// is left as named, for the trampoline's exec to fail on.
	cmd := &exec.Cmd{Path: r.argv[0], Args: append([]string(nil), r.argv...)}
	if p, err := proc.LookPath(r.argv[0], e.Getenv("PATH")); err == nil && r.argv[0] != "" {
		cmd.Path = p
	}
	cmd.Args[0] = filepath.Base(r.argv[0])
	// No namespaces, but no new privileges and the seccomp filter:
	// the program starts through ctx's confining trampoline.
	self, err := fsops.Executable()
	if err != nil {
		return nil, nil, cli.Fail(e, cli.Unavailable, "agent %s: cannot find ctx itself to confine the program: %v", r.Agent.Name, err), false
	}
	network := fssandbox.ConfineNoNetwork
	if networkGranted(r.Agent) || r.net != nil {
		// iso shared with named grants: the proxy variables, nothing
		// enforced (network.go).
		network = fssandbox.ConfineNetwork
	}
	cmd = &exec.Cmd{Path: self, Args: append([]string{fssandbox.ConfineApplet, network, cmd.Path}, cmd.Args...)}
	cmd.Env, cmd.Dir = r.env, r.workspace
	if runcap != nil { // always: iso shared has no broker
		cmd.ExtraFiles = []*os.File{runcap.Child}
	}
	// A session of its own: never the caller's controlling terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil, 0, true
}

// onStarted is what the run host does the moment the first process has
// started (pid): the plan to the init, the process into the run's
// cgroup, the release, and then the budgets watch, the broker's knowledge
// of its init, the status ready and the forwarding of sigs.
func (r *AgentRun) onStarted(e *cli.Env, sandbox *fssandbox.Sandbox, runcap *broker.RunCapability, stopWatch chan struct{}, sigs <-chan os.Signal) func(pid int) {
	return func(pid int) {
		if r.broker != nil {
			// Before the program can run: the broker knows the run's
			// processes by their descent from it.
			r.broker.initPid.Store(int64(pid))
		}
		// The plan goes at once: the init builds the sandbox while it is
		// put into the run's cgroup (a cgroup v1 attach can take
		// milliseconds), and starts the program only when released, so
		// every process of the run is born inside.
		if sandbox != nil {
			sandbox.SendPlan()
		}
		if cg := r.budgets.cgroup; cg != nil && !r.bornInside && !r.initJoins {
			if err := cg.Add(pid); err != nil {
				cli.Errorf(e.Stderr, "ctx agent", "%s: run cgroup: %v; ending the run", r.Agent.Name, err)
				fsops.SignalProcess(pid, syscall.SIGKILL)
			}
		}
		if sandbox != nil {
			sandbox.Release()
		}
		if p, err := fsops.OpenProcess(pid); err == nil {
			r.initProc = p // not reaped yet: it is the init
		}
		go r.watchBudgets(stopWatch, func() { r.killRun(pid) })
		go r.watchDisk(stopWatch, func() { r.endRunNow(pid) })
		if r.broker != nil {
			r.broker.sandboxStarted()
		}
		r.net.SandboxStarted()
		r.closeIDMap()
		runcap.CloseChild()
		r.setStatus("ready", os.Getpid())
		go r.forwardSignals(sigs, pid)
	}
}

// startFirst starts the run's first process (the sandbox's init, or the
// confined program) inside the run's cgroup when it can (see
// cgroup.Run.StartInside); started moves it in otherwise.
func (r *AgentRun) startFirst(cmd *exec.Cmd) error {
	if cmd.Process != nil {
		return nil // started early (startEarly)
	}
	if r.initJoins && cmd == r.joinCmd {
		// Born outside; the thread that starts every process of the run
		// joins the cgroup before the plan is read (letInitJoinCgroup).
		err := cmd.Start()
		if err != nil {
			r.dropCgroupJoin()
			return err
		}
		closeFiles(r.cgTasks) // the init holds its own copies now
		r.cgTasks = nil
		return nil
	}
	cg := r.budgets.cgroup
	if cg == nil {
		return cmd.Start()
	}
	inside, err := cg.StartInside(cmd.Start)
	r.bornInside = inside
	return err
}

// forwardSignals passes SIGTERM, SIGHUP and SIGINT to the sandbox's init
// (which passes them to every process of the run), then kills it after the
// grace period.
func (r *AgentRun) forwardSignals(sigs <-chan os.Signal, pid int) {
	for sig := range sigs {
		fsops.SignalProcess(pid, syscall.SIGTERM)
		if r.plan == nil {
			fsops.SignalGroup(pid, sig.(syscall.Signal))
		}
		time.AfterFunc(lifecycle.StopGrace, func() {
			fsops.SignalProcess(pid, syscall.SIGKILL)
			fsops.SignalGroup(pid, syscall.SIGKILL)
		})
	}
}

// finish records the end of the run: status dead, no pid, agent.stop, the
// session idle, and the run's runtime files gone (the session keeps
// everything durable).
func (r *AgentRun) finish(status int) {
	r.setStatus("dead", 0)
	st := "ok"
	if status != 0 {
		st = "error"
	}
	r.recordEvent(fsops.Event{Type: "agent.stop", Object: "agent/" + r.Agent.Name, Status: st, Exit: &status, Detail: r.protectDetail()})
	fsops.WriteVolatile(filepath.Join(r.Sess.Dir, "state"), []byte("idle\n"), r.Sess.FileMode)
	fsops.WriteVolatile(filepath.Join(r.Sess.Dir, "updated_at"), []byte(strconv.FormatInt(time.Now().Unix(), 10)+"\n"), r.Sess.FileMode)
	r.removeRunDir()
}

// waitStatus turns cmd.Wait's result into a shell-style status.
func waitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return toolrun.ExitStatus(ee.ProcessState)
	}
	return cli.Internal
}
