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
	"ctx/ptyterm"
)

// runAgentStart is `ctx agent start NAME [--session S] [--cwd PATH]
// [--mount SRC DST ro|rw]... [--terminal] [-- CMD ARGS]`. It stays in the
// foreground as the run host until the run ends, and exits with the
// program's status.
func RunAgentStart(e *cli.Env, args []string) int {
	return startAgentRun(e, args, nil)
}

// startAgentRun is ctx agent start; lock, when not nil, is the agent's run
// lock the caller took already (ctxmcp serve decides between starting and
// joining a run under it).
func startAgentRun(e *cli.Env, args []string, lock *os.File) int {
	if lock != nil {
		defer lock.Close()
	}
	var session, sharedSpace, cwd string
	var mounts [][]string
	var forceTerminal, noConsole, showPlan, allowHostRoot, raw bool
	// Descriptors the caller left open (a shell's 7</) must not reach the
	// sandbox or anything this run host starts.
	fsops.CloseInheritedOnExec()
	// What the run's start waits for later begins now, on the other core,
	// while the agent is loaded: the isolation probe (an auto iso needs
	// it) and the Go runtime's one check of pidfd support, which it makes
	// before its first process start, the init's.
	probe := fsops.ProbeAhead()
	go fsops.WarmProcessStart()
	f := cli.NewFlags()
	f.String("session", &session)
	f.String("shared", &sharedSpace)
	f.String("cwd", &cwd)
	f.Tuple("mount", 3, &mounts)
	f.Bool("terminal", &forceTerminal)
	f.Bool("no-console", &noConsole)
	f.Bool("raw", &raw)
	f.Bool("plan", &showPlan)
	f.Bool("allow-host-root", &allowHostRoot)
	root, a, code, ok := lifecycle.AgentArgs(e, args, f)
	if !ok {
		return code
	}
	if !showPlan && lock == nil {
		// One run per agent at a time: the lock is held for the life of
		// this process, and released by the kernel however it ends. It
		// is taken first, before anything of the run is made.
		var err error
		if lock, err = lockAgent(root, a.Name); err != nil {
			// Running already: the program joins that run.
			if why := joinable(mounts, sharedSpace, cwd, forceTerminal); why != nil {
				return cli.Fail(e, cli.Unavailable, "%v (%v shapes a new sandbox: it cannot join the running one)", err, why)
			}
			return joinRun(e, root, a, session, f.Command)
		}
		defer lock.Close()
	}
	r := &AgentRun{stderr: e.Stderr, Root: root, Agent: a, callerUID: os.Getuid(), callerGID: os.Getgid(), allowHostRoot: allowHostRoot, planOnly: showPlan, probe: probe,
		agents: authority.NewAgents(root, a)}
	defer r.closeIDMap()
	defer r.endBudgets()
	defer r.closeBroker()
	// An init started early and never taken dies before the cgroup it
	// was born in is removed (endBudgets, deferred earlier, runs later).
	defer r.abandonEarly()
	r.noConsole, r.rawConsole = noConsole, raw
	r.onTerminal = forceTerminal || noConsole || ptyterm.IsTerminal(e.Stdin)
	if code, ok := r.prepare(e, session, sharedSpace, cwd, mounts, f.Command); !ok {
		r.removeRunDir() // a run that never started leaves no run directory
		return code
	}
	if showPlan {
		// --plan: print the sandbox plan as JSON and start nothing.
		defer r.removeRunDir()
		b, _ := json.MarshalIndent(r.plan, "", "  ")
		fmt.Fprintf(e.Stdout, "%s\n", b)
		return cli.OK
	}
	return r.run(e)
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
