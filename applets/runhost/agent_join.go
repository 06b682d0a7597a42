package runhost

import (
	"fmt"
	"time"

	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/policy"
)

// joinRun is ctx agent start for an agent that is running already: instead
// of failing, the program (argv; tsh when empty) joins that run. The run
// host starts it in the sandbox as the agent's own program runs (its
// environment, working directory, uid, limits and walls), with this
// process's standard streams (a terminal or file reaches it as a pipe, as
// any caller's), and the run lasts until it has ended too. session is
// --session when given: it must be the run's. The exit status is the
// program's; Ctrl-C, SIGTERM or SIGHUP ends it.
func joinRun(e *cli.Env, root fsops.Root, a *policy.Agent, session string, argv []string) int {
	var pid int
	// A run being started (its lock taken, no pid yet) is waited for.
	for i := 0; i < 100; i++ {
		if pid = lifecycle.RunHostPid(root, a.Name); pid != 0 {
			break
		}
		if f, err := lockAgent(root, a.Name); err == nil {
			f.Close()
			return cli.Fail(e, cli.Unavailable, "agent %s: its run ended while joining it; start it again", a.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pid == 0 {
		return cli.Fail(e, cli.Unavailable, "agent %s is being started and has no run host yet; try again", a.Name)
	}
	run, code, ok := lifecycle.FindLiveRun(e, root, a, pid)
	if !ok {
		return code
	}
	defer run.Close()
	if session != "" && session != run.Id.Session {
		return cli.UsageError(e, "--session %s: agent %s is running in session %s; a second start joins that run", session, a.Name, run.Id.Session)
	}
	if run.SecretErr != nil {
		return cli.Fail(e, cli.Denied, "agent %s: the run's secret cannot be read: %v", a.Name, run.SecretErr)
	}
	if len(argv) == 0 {
		argv = []string{"tsh"}
	}
	fmt.Fprintf(e.Stderr, "ctx agent: %s is running (session %s, pid %d): joining its run\n", a.Name, run.Id.Session, pid)
	shielded := *e
	shielded.Stdin, shielded.Stdout, shielded.Stderr = lifecycle.ShieldInput(e.Stdin), lifecycle.ShieldOutput(e.Stdout), lifecycle.ShieldOutput(e.Stderr)
	fds, relay, err := toolrun.StandardDescriptors(&shielded)
	if err != nil {
		return cli.Fail(e, cli.Internal, "%v", err)
	}
	req := broker.Request{Join: &broker.Join{Argv: argv}, Secret: run.Secret}
	return toolrun.CallBroker(e, run.Conn, req, fds, relay, "agent "+a.Name+"'s run host")
}

// joinable reports why a start cannot join a running run: the options
// that shape a new sandbox have no meaning for a program joining one.
func joinable(mounts [][]string, sharedSpace, cwd string, terminal bool) error {
	switch {
	case len(mounts) > 0:
		return fmt.Errorf("--mount")
	case sharedSpace != "":
		return fmt.Errorf("--shared")
	case cwd != "":
		return fmt.Errorf("--cwd")
	case terminal:
		return fmt.Errorf("--terminal")
	}
	return nil
}
