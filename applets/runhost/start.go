package runhost

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/fsops/sandbox"
	"ctx/ptyterm"
)

// Options are what a caller asks of one run: `ctx agent start`'s flags, or
// the fixed program of `ctx run` and `ctxmcp serve`.
type Options struct {
	Root  fsops.Root
	Agent string // the agent's name; Start loads its controls
	// Session, Shared and Cwd choose where the run records and works:
	// a named session, a shared space's session, the workspace.
	Session, Shared, Cwd string
	Mounts               [][]string // SRC DST ro|rw, beyond the agent's mounts control
	// Terminal runs the program on a PTY even when stdin is not a
	// terminal; NoConsole does so without making the caller's terminal
	// its console; Raw passes the program's control sequences through.
	Terminal, NoConsole, Raw bool
	Plan                     bool // print the sandbox plan as JSON and start nothing
	AllowHostRoot            bool // let a root caller run the agent as host root (DESIGN §16 rule 1)
	Command                  []string
}

// Start is one run of an agent, from the caller's request to the record
// of its end; it stays in the foreground as the run host and returns the
// program's status. Its steps, in order (DESIGN §8):
//
//  1. Close what the caller left open; begin the isolation probe and the
//     runtime's process-start check on another core.
//  2. Load the agent; take its run lock, or join the run that holds it.
//  3. Prepare (prepare, agentrun_prepare.go): who may start it and how;
//     the session, workspace and runtime directory; beside them the
//     tools it may run, the idmapped workspace and the cgroup with an
//     init started early; the session, the program's environment, the
//     protected paths and grants; the disk budget; the run directory;
//     the sandbox plan.
//  4. With Plan, print the plan; else host the run (run, agentrun_host.go):
//     the run capability, the first command, agent.start, signals, the
//     program on the terminal or on pipes, its end.
//  5. Close it (closeRun, finish): the broker settled, children ended, the
//     budgets' last look, the protect census, agent.stop.
//
// Teardown is the reverse, and is this function's alone (teardown).
func Start(e *cli.Env, o Options) int {
	// Descriptors the caller left open (a shell's 7</) must not reach the
	// sandbox or anything this run host starts.
	fsops.CloseInheritedOnExec()
	// What the run's start waits for later begins now, on the other core,
	// while the agent is loaded: the isolation probe (an auto iso needs
	// it) and the Go runtime's one check of pidfd support, which it makes
	// before its first process start, the init's.
	probe := sandbox.ProbeAhead()
	go fsops.WarmProcessStart()
	a, code, ok := lifecycle.LoadAgent(e, o.Root, o.Agent)
	if !ok {
		return code
	}
	if !o.Plan {
		// One run per agent at a time: the lock is held for the life of
		// this process, and released by the kernel however it ends. It
		// is taken first, before anything of the run is made.
		lock, err := lockAgent(o.Root, a.Name)
		if err != nil {
			// Running already: the program joins that run.
			if why := joinable(o.Mounts, o.Shared, o.Cwd, o.Terminal); why != nil {
				return cli.Fail(e, cli.Unavailable, "%v (%v shapes a new sandbox: it cannot join the running one)", err, why)
			}
			return joinRun(e, o.Root, a, o.Session, o.Command)
		}
		defer lock.Close()
	}
	r := &AgentRun{stderr: e.Stderr, Root: o.Root, Agent: a, callerUID: os.Getuid(), callerGID: os.Getgid(),
		allowHostRoot: o.AllowHostRoot, planOnly: o.Plan, probe: probe, agents: authority.NewAgents(o.Root, a)}
	defer r.teardown()
	r.noConsole, r.rawConsole = o.NoConsole, o.Raw
	r.onTerminal = o.Terminal || o.NoConsole || ptyterm.IsTerminal(e.Stdin)
	if code, ok := r.prepare(e, o.Session, o.Shared, o.Cwd, o.Mounts, o.Command); !ok {
		r.removeRunDir() // a run that never started leaves no run directory
		return code
	}
	if o.Plan {
		defer r.removeRunDir()
		b, _ := json.MarshalIndent(r.plan, "", "  ")
		fmt.Fprintf(e.Stdout, "%s\n", b)
		return cli.OK
	}
	return r.run(e)
}

// teardown undoes what Start made, however the run ended: an init started
// early and never taken dies first, before the cgroup it was born in is
// removed; then the broker closes, the budgets end (the cgroup goes) and
// the idmapped workspace is released.
func (r *AgentRun) teardown() {
	r.abandonEarly()
	r.closeNetwork()
	r.closeBroker()
	r.endBudgets()
	r.closeIDMap()
}

// lockAgent takes the agent's run lock: an exclusive flock on its control
// directory, held until the returned file is closed.
func lockAgent(root fsops.Root, name string) (*os.File, error) {
	f, err := os.OpenFile(root.AgentControl(name), os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if err := fsops.TryLock(f); err != nil {
		f.Close()
		pid, _ := fsops.ReadControl(filepath.Join(root.AgentControl(name), "pid"))
		return nil, fmt.Errorf("agent %s is already running (pid %s); stop it with ctx agent stop%s %s", name, strings.TrimSpace(string(pid)), root.Option(), name)
	}
	return f, nil
}
