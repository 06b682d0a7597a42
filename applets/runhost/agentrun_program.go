package runhost

import (
	"os"
	"strings"
	"sync"

	"ctx/applets/cli"
	"ctx/applets/toolchain"
	"ctx/fsops/proc"
	"ctx/policy"
)

// checkProgramShown refuses, before anything starts, a program its
// sandbox would not start because it, or what its start goes through (the
// links to its file, the interpreter of its #! line and that one's, a
// shim's tree), lies outside what the sandbox shows (a toolchain in the
// person's home: pyenv shims, nvm, ~/.local/bin): exit 127, one line
// naming the paths and the mount lines that show them (package
// toolchain). What the host has not either is left to the sandbox, whose
// init names it. exe is the program the run host chose itself (tsh), if
// any.
func (r *AgentRun) checkProgramShown(e *cli.Env, exe string) (int, bool) {
	c := r.checkProgram(e, exe)
	if c == nil {
		return 0, true
	}
	msg := c.Refusal(r.Root, r.Agent.Name, string(r.iso), proc.EnvPath(r.env, ""))
	return cli.Fail(e, cli.NotFound, "agent %s: %s", r.Agent.Name, cli.Escape(msg)), false
}

// checkProgram is toolchain's check of the run's program in the plan
// built, nil when there is nothing to say or nothing to check.
func (r *AgentRun) checkProgram(e *cli.Env, exe string) *toolchain.Check {
	if exe != "" || len(r.argv) == 0 || r.plan == nil || r.plan.RootFS {
		return nil
	}
	return toolchain.CheckProgram(r.plan, r.argv[0], proc.EnvPath(r.env, ""), e.Getenv("PATH"), r.managers(e))
}

// managers: the agent's env control, else the caller's environment.
func (r *AgentRun) managers(e *cli.Env) toolchain.Managers {
	return toolchain.Managers{Agent: r.env, Caller: e.Getenv, Home: e.Getenv("HOME")}
}

// chainMounts are the read-only mounts the run host adds by itself for
// the chain of the run's program and the managers' trees of its PATH
// (toolchain.RunMounts, which says what it checks); why not, on stderr.
func (r *AgentRun) chainMounts(e *cli.Env, exe string, extra []policy.Mount) []policy.Mount {
	mounts := append(append([]policy.Mount(nil), r.Agent.Mounts...), extra...)
	plan := r.plan
	places := sync.OnceValue(func() []string {
		others := toolchain.OthersWrite(r.Root, func(name string) []policy.Mount {
			if a, err := r.agents.Load(name); err == nil {
				return a.Mounts
			}
			return nil
		})
		return append(others, toolchain.AgentWritePlaces(r.workspace, r.Root.Dir, mounts, plan)...)
	})
	g := toolchain.Guard{Mounts: mounts, Landlock: r.iso == policy.IsoLandlock, Workspace: r.workspace, UID: os.Geteuid(), Places: places}
	more, refused := toolchain.RunMounts(r.checkProgram(e, exe), r.plan, proc.EnvPath(r.env, ""), r.managers(e), g, r.Root.Dir)
	for _, why := range refused {
		cli.Warnf(e, "agent %s: %s", r.Agent.Name, cli.Escape(why))
	}
	return more
}

// chainEventNote names, in the agent.start event, the directories the run
// host showed by itself for the program's chain.
func (r *AgentRun) chainEventNote() string {
	if len(r.chainShown) == 0 {
		return ""
	}
	return " chain=" + strings.Join(r.chainShown, ",")
}
