package ctx

import (
	"fmt"

	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// RunAgentEnv is `ctx agent env [--root DIR] [--session S] [--run R] AGENT`:
// it prints the environment the agent's program would start with in its
// sandbox, one KEY=VALUE per line, in order; a secret's value is shown as
// <secret>.
func RunAgentEnv(e *cli.Env, args []string) int {
	var rootFlag, session, run string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.String("session", &session)
	f.String("run", &run)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	if session == "" {
		session = "default"
	}
	if run == "" {
		run = fsops.NewRunID()
	}
	for _, v := range [][2]string{{"session", session}, {"run", run}} {
		if err := policy.ValidName(v[1]); err != nil {
			return cli.UsageError(e, "--%s: %s", v[0], err)
		}
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	a, code, ok := lifecycle.LoadAgent(e, root, pos[0])
	if !ok {
		return code
	}
	// The secrets by name only (VAR=<secret>), read as a start reads
	// them: an env a start would refuse is refused here too.
	secrets, code, ok := lifecycle.LoadSecrets(e, root, a)
	if !ok {
		return code
	}
	env := sandboxplan.SandboxEnv(a, sandboxplan.RunSettings{
		Session: session,
		Run:     run,
		Term:    e.Getenv("TERM"),
		Lang:    e.Getenv("LANG"),
	})
	env = policy.WithSecrets(env, secrets, true)
	for _, kv := range env {
		fmt.Fprintln(e.Stdout, kv)
	}
	return cli.OK
}
