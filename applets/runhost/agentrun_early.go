package runhost

import (
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops/sandbox"
	"ctx/policy"
	"ctx/policy/sandboxplan"
	"ctx/ptyterm"
)

// Starting the sandbox's init early: a run with namespaces (iso userns or
// uid) starts its init as soon as the run's cgroup exists, while the run
// host still prepares the run (a run on a terminal: on the PTY ctxterm
// then serves, ptyterm.OpenPTY). Being born in new namespaces, exec'ing
// ctx and starting a Go runtime were the init's own cost, all of it on
// the start's critical path; now it happens beside the preparation, and
// the init waits for its plan. The descriptors it needs that do not exist
// yet (the broker's channel, the idmapped workspace) come with the plan
// (sandbox.Sandbox.SendPlan).
//
// Nothing of the run starts before the plan: the init only waits. A
// preparation that fails kills it (abandonEarly); one whose plan needs
// other namespaces than the init was born in (the agent's network grant
// changed in between) starts a new init the usual way.

// startCgroupAndInit makes the run's budgets and cgroup (a mkdir in each
// hierarchy, at times slow) and then, born inside it, the early
// init, beside the rest of the preparation; the channel is closed when
// both are done.
func (r *AgentRun) startCgroupAndInit(e *cli.Env) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.startBudgets(r.planOnly)
		r.startEarly(e)
	}()
	return done
}

// earlyInit is an init started early, and the PTY it was started on (a
// run on a terminal).
type earlyInit struct {
	sb  *sandbox.Sandbox
	pty *ptyterm.PTY
	// startErr is why the init could not be started: for an explicit
	// mode, whose namespaces are not probed beforehand, the first sign
	// that the host refuses them (recheckMode).
	startErr error
}

// startEarly starts the init, when this run allows it, on another
// thread: starting it waits for its exec. When it cannot be started, the
// init is started later as before.
func (r *AgentRun) startEarly(e *cli.Env) {
	if r.planOnly || (r.iso != policy.IsoUserns && r.iso != policy.IsoUID) {
		return
	}
	a := r.Agent
	start := sandbox.Start{
		Namespaces: sandboxplan.SandboxNamespaces(string(r.iso), networkGranted(a)),
		UID:        a.UID, GID: a.GID, OuterUID: uint32(r.callerUID), OuterGID: uint32(r.callerGID),
	}
	done := make(chan earlyInit, 1)
	r.early = done
	go func() {
		var ei earlyInit
		defer func() { done <- ei }()
		sb, err := sandbox.NewFor(start)
		if err != nil {
			return
		}
		var pty *ptyterm.PTY
		if r.onTerminal {
			if pty, err = ptyterm.OpenPTY(r.terminalConfig(e)); err != nil {
				sb.Abandon()
				return
			}
			pty.Prepare(sb.Cmd)
		} else {
			r.shieldStdio(e, sb)
		}
		r.letInitJoinCgroup(sb)
		if err := r.startFirst(sb.Cmd); err != nil {
			ei.startErr = err
			sb.Abandon()
			if pty != nil {
				pty.Close()
			}
			return
		}
		if pty != nil {
			pty.Started()
		}
		ei = earlyInit{sb: sb, pty: pty}
	}()
}

// takeEarly hands the early init to the run with its plan, or nil when
// there is none or the plan needs another (it is then ended).
func (r *AgentRun) takeEarly() *sandbox.Sandbox {
	if r.early == nil {
		return nil
	}
	ei := <-r.early
	r.early = nil
	r.earlyErr = ei.startErr
	if ei.sb == nil {
		return nil
	}
	if err := ei.sb.SetPlan(r.plan); err != nil {
		ei.abandon()
		r.dropCgroupJoin() // the init that would have joined is gone
		return nil
	}
	r.earlyPTY = ei.pty
	return ei.sb
}

// abandon ends an early init and closes its PTY.
func (ei earlyInit) abandon() {
	if ei.sb != nil {
		ei.sb.Abandon()
	}
	if ei.pty != nil {
		ei.pty.Close()
	}
}

// sendEarly sends an early init its plan and descriptors at once: it
// builds the sandbox while the run host records the start, and waits
// for the release (onStarted) to start the program.
func (r *AgentRun) sendEarly(sb *sandbox.Sandbox) {
	if sb.Cmd.Process != nil {
		sb.SendPlan()
	}
}

// abandonEarly ends an early init the run never took (the preparation
// failed).
func (r *AgentRun) abandonEarly() {
	if r.early == nil {
		return
	}
	(<-r.early).abandon()
	r.early = nil
}

// shieldStdio gives the init the caller's standard files the way every
// run without a terminal gets them: the caller's terminal or files reach
// the agent only as pipes.
func (r *AgentRun) shieldStdio(e *cli.Env, sb *sandbox.Sandbox) {
	sb.Cmd.Stdin, sb.Cmd.Stdout, sb.Cmd.Stderr = lifecycle.ShieldInput(e.Stdin), lifecycle.ShieldOutput(e.Stdout), lifecycle.ShieldOutput(e.Stderr)
}

// recheckMode refuses the start, before anything is logged, when the
// early init could not be started because this host refuses the mode's
// namespaces: an explicit iso userns or uid is not probed before the
// start (the init's start is the probe), so this is where a mode that
// cannot work here is found, and refused as checkStart refuses it. Any
// other failure to start is left to the start proper, which says why.
func (r *AgentRun) recheckMode(e *cli.Env) (int, bool) {
	if r.earlyErr == nil || r.isoAsked == policy.IsoAuto {
		return 0, true
	}
	probe := r.probe
	if probe == nil {
		probe = sandbox.ProbeIsolation
	}
	if _, err := policy.ChooseIso(r.isoAsked, uint32(r.callerUID), probe(true)); err != nil {
		return cli.Fail(e, cli.Unavailable, "agent %s: %v", r.Agent.Name, err), false
	}
	return 0, true
}
