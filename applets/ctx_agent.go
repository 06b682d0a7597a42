package applets

import (
	"errors"
	"io/fs"
	"os"

	"ctx/fsops"
	"ctx/policy"
	"ctx/ptyterm"
)

// agentVerbs are the verbs of `ctx agent VERB`, one file each
// (ctx_agent_VERB.go), documented together in manual/ctx-agent.md.
var agentVerbs = []subcommand{
	{"env", runAgentEnv},
}

// runAgent is `ctx agent VERB ARGS`.
func runAgent(e *Env, args []string) int {
	return runVerb(e, "ctx-agent", agentVerbs, args)
}

// runVerb dispatches `ctx CMD VERB ARGS` to one of verbs. An unknown or
// missing verb is a usage error; `ctx CMD VERB --help` prints the command's
// synopsis (page).
func runVerb(e *Env, page string, verbs []subcommand, args []string) int {
	if len(args) == 0 {
		return usageError(e, "missing verb (%s)", verbNames(verbs))
	}
	for _, v := range verbs {
		if v.Name != args[0] {
			continue
		}
		e.Name += " " + v.Name
		if len(args) == 2 && (args[1] == "--help" || args[1] == "-h") {
			return printHelp(e, page)
		}
		return v.Run(e, args[1:])
	}
	return usageError(e, "unknown verb %s (%s)", ptyterm.Escape(args[0]), verbNames(verbs))
}

func verbNames(verbs []subcommand) string {
	s := ""
	for i, v := range verbs {
		if i > 0 {
			s += ", "
		}
		s += v.Name
	}
	return s
}

// loadAgent reads and parses agent/NAME.d/ under root. On failure it has
// printed the error and returns the exit code: 2 for an invalid name, 127
// when the agent does not exist, 69 when its control directory cannot be
// read safely or holds invalid controls.
func loadAgent(e *Env, root fsops.Root, name string) (*policy.Agent, int, bool) {
	if err := policy.ValidName(name); err != nil {
		return nil, usageError(e, "agent %s", ptyterm.Escape(err.Error())), false
	}
	dir := root.AgentControl(name)
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fail(e, exitNotFound, "unknown agent %s (no %s)", name, ptyterm.Escape(dir)), false
	case err != nil:
		return nil, fail(e, exitUnavailable, "%s", ptyterm.Escape(err.Error())), false
	case !st.IsDir():
		// A symlinked control directory is refused like a symlinked
		// control file: the agent's authority is never read through one.
		return nil, fail(e, exitUnavailable, "%s is not a directory (a %s)", ptyterm.Escape(dir), st.Mode().Type()), false
	}
	controls, err := fsops.ReadControls(dir, policy.AgentControlNames)
	if err != nil {
		return nil, fail(e, exitUnavailable, "agent %s: %s", name, ptyterm.Escape(err.Error())), false
	}
	a, err := policy.ParseAgent(name, controls)
	if err != nil {
		// The error starts with the control's file name, so prefixing the
		// directory names the exact file: agent/coder.d/perm: line 1: ...
		return nil, fail(e, exitUnavailable, "agent/%s.d/%s", name, ptyterm.Escape(err.Error())), false
	}
	return a, exitOK, true
}
