package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops/proc"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// The sandbox's init once the sandbox is built: it starts the agent's
// program, serves the broker's orders on its own locked thread (so every
// tool inherits its walls), forwards termination signals, reaps, and ends
// every process of the run when the program has ended.

// runAgentProgram starts the agent's program with its identity and
// environment and waits as init: it reaps every process of the namespace,
// forwards termination signals, and when the program exits, everything
// else in the sandbox goes with it.
func runAgentProgram(plan *sandboxplan.Plan, sigs chan os.Signal, stderr io.Writer) int {
	cmd, code := agentCommand(plan, stderr)
	if cmd == nil {
		return code
	}
	if sig, ok := pendingTermination(sigs); ok {
		return proc.Signaled(sig) // asked to end before the program started
	}
	if !plan.Namespaces.PID {
		// No pid namespace to hold the run (iso landlock): the init is
		// its subreaper, so whatever leaves the program's session or
		// double-forks still comes back to it, and ends with the run.
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: starting %s: %s\n", plan.Argv[0], startFailure(plan, cmd.Path, err))
		return proc.StartFailure(err)
	}
	status := serveRun(plan, cmd.Process.Pid, sigs)
	endRun(plan, sigs)
	leaveRunCgroup()
	reportEnd(status)
	return status
}

// agentCommand applies the program's limits and walls (the program and
// every tool inherit them from this thread), waits for the run host's
// release, and returns the program's command, not started; or nil and
// the exit status once it has printed why not.
func agentCommand(plan *sandboxplan.Plan, stderr io.Writer) (*exec.Cmd, int) {
	exe := plan.Exe
	if exe == "" {
		exe = plan.Argv[0]
		if !strings.Contains(exe, "/") {
			exe = agentPath(exe, plan.Env)
		}
	}
	if err := applyLimits(plan.Limits); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: %v\n", err)
		return nil, proc.ExitUnavailable
	}
	if err := applyWalls(plan, exe); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: %v\n", err)
		return nil, proc.ExitUnavailable
	}
	if err := awaitRelease(); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: %v\n", err)
		return nil, proc.ExitUnavailable
	}
	cmd := &exec.Cmd{Path: exe, Args: plan.Argv, Env: plan.Env, Dir: plan.Cwd,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	// The run capability, only in a run that hands it on (one without a
	// broker: CTX_RUN_FD in the plan's environment); in any other run
	// descriptor 3 is not passed, whatever the init has there.
	if hasEnv(plan.Env, "CTX_RUN_FD="+strconv.Itoa(RunFD)) && runFile != nil {
		cmd.ExtraFiles = []*os.File{runFile}
	}
	// In a user namespace init already runs as the agent's uid and gid (the
	// namespace maps them onto the caller's). In uid mode init is real root
	// and the program gets the agent's ids. Either way the bounding set is
	// empty and no_new_privs is set, so execve grants no capability.
	if cred := agentCredential(plan); cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd, 0
}

// serveRun is the init's loop while the run lasts: it runs the broker's
// orders, reaps, and passes termination on, until the program (child)
// has exited and every program that joined the run has too. It returns
// the program's status.
func serveRun(plan *sandboxplan.Plan, child int, sigs <-chan os.Signal) int {
	broker := newInitBroker(plan)
	orders, ended := broker.deliveries(), broker.endings()
	status := -1
	// The run ends when its program has, and every program that joined
	// it since (a second ctx agent start, a second MCP client) too.
	for status < 0 || broker.holding() {
		select {
		case d, ok := <-orders:
			if !ok {
				orders = nil // the host closed the channel; no more calls
				continue
			}
			// On this, the locked thread: the tool inherits the walls.
			broker.handle(d)
		case e := <-ended:
			broker.callEnded(e)
		case sig := <-sigs:
			switch sig {
			case syscall.SIGCHLD:
				if st := reap(child, broker); st >= 0 {
					status = st
				}
			case syscall.SIGTERM, syscall.SIGHUP:
				// Pass termination on to every process of the sandbox.
				signalRun(plan, sig.(syscall.Signal))
			default:
				// SIGINT and SIGQUIT from the terminal reach the
				// foreground group by themselves; init only must not die
				// of them.
			}
		}
	}
	return status
}

// endRun ends what the program left behind, and reaps it.
func endRun(plan *sandboxplan.Plan, sigs <-chan os.Signal) {
	if !plan.Namespaces.PID && noChild() {
		// Every process of the run is reaped, and the init is its
		// subreaper, so none is left anywhere: nothing to list. (A
		// lookup under the init's /proc directory costs the run host
		// time when it reaps the init.)
		return
	}
	signalRun(plan, syscall.SIGKILL)
	if plan.Namespaces.PID {
		for {
			if _, err := syscall.Wait4(-1, nil, 0, nil); err == syscall.ECHILD {
				break
			}
		}
		return
	}
	// Without a pid namespace a process may fork between the listing and
	// the kill: kill and reap in rounds until no child is left (the init
	// is the run's subreaper, so no child means no descendant), bounded.
	// A round ends when a child exits (SIGCHLD) or after endRound, not
	// always after endRound: what was killed is usually gone at once, and
	// the run's end waited a whole round for it.
	deadline := time.Now().Add(endRunLimit)
	for time.Now().Before(deadline) {
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if err == syscall.ECHILD {
				return
			}
			if pid <= 0 {
				break
			}
		}
		awaitChild(sigs, endRound)
		signalRun(plan, syscall.SIGKILL)
	}
}

// noChild reports whether this process has no child at all, running or
// exited and not yet reaped.
func noChild() bool {
	var info unix.Siginfo
	return unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil) == unix.ECHILD
}

// endRound is the longest a round of endRun waits for a child to exit;
// endRunLimit bounds all its rounds.
const (
	endRound    = 10 * time.Millisecond
	endRunLimit = 2 * time.Second
)

// awaitChild waits until a child may have exited (SIGCHLD among sigs) or
// d has passed. Other signals are dropped: the run is ending anyway.
func awaitChild(sigs <-chan os.Signal, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGCHLD {
				return
			}
		case <-t.C:
			return
		}
	}
}

// agentCredential is who the program and every brokered tool run as when
// the init must switch to it: in uid mode, and in iso landlock run by root
// (a user's landlock run is the user; a user namespace maps the agent by
// itself).
func agentCredential(plan *sandboxplan.Plan) *syscall.Credential {
	switch {
	case plan.Iso == "uid", plan.Iso == string(policy.IsoLandlock) && os.Geteuid() == 0 && plan.UID != 0:
		return &syscall.Credential{Uid: plan.UID, Gid: plan.GID, Groups: plan.Groups}
	}
	return nil
}

// signalRun sends sig to every process of the run. With a pid namespace
// that is kill(-1): everything but the init. Without one (iso landlock)
// kill(-1) would reach the whole host: the init is the run's subreaper
// instead, and signals exactly its own descendants.
func signalRun(plan *sandboxplan.Plan, sig syscall.Signal) {
	if plan.Namespaces.PID {
		syscall.Kill(-1, sig)
		return
	}
	proc.SignalDescendants(os.Getpid(), sig)
}

// reap collects every exited child without blocking, reports the tool
// processes the broker started, and returns the exit status of child once
// it is among them, else -1.
func reap(child int, broker *initBroker) int {
	status := -1
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return status
		}
		code := proc.StatusCode(ws)
		if pid == child {
			status = code
		} else {
			broker.exited(pid, code)
		}
	}
}

// agentPath finds name in the PATH of the agent's environment (the init's
// own environment is not the agent's), or returns it unchanged when it is
// not found, for the exec to fail on it with ENOENT.
func agentPath(name string, env []string) string {
	if p, err := proc.LookPath(name, proc.EnvPath(env, "/usr/bin:/bin")); err == nil {
		return p
	}
	return name
}

// hasEnv reports whether env holds the entry kv exactly.
func hasEnv(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}
