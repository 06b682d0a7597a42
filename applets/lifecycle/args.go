package lifecycle

import (
	"errors"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// AgentArgs parses `[--root DIR] NAME` and the verb's own options (which
// options registers on f) and loads agent NAME. On failure it has printed
// the error and returns the exit code.
func AgentArgs(e *cli.Env, args []string, f *cli.FlagSet) (fsops.Root, *policy.Agent, int, bool) {
	var rootFlag string
	f.String("root", &rootFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, 1)
	if !ok {
		return fsops.Root{}, nil, code, false
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	a, code, ok := LoadAgent(e, root, pos[0])
	return root, a, code, ok
}

// LoadAgent reads and parses agent/NAME.d/ under root. On failure it has
// printed the error and returns the exit code: 2 for an invalid name, 127
// when the agent does not exist, 13 when the kernel refused reading it
// (EACCES, EPERM: the one errno mapping, cli.ErrExit), 69 when its control
// directory cannot be read safely or holds invalid controls.
func LoadAgent(e *cli.Env, root fsops.Root, name string) (*policy.Agent, int, bool) {
	if err := policy.ValidName(name); err != nil {
		return nil, cli.UsageError(e, "agent %s", err), false
	}
	a, err := authority.LoadAgent(root, name)
	switch {
	case errors.Is(err, authority.ErrNoAgent):
		return nil, cli.Fail(e, cli.NotFound, "%v", err), false
	case err != nil:
		return nil, cli.FailErr(e, cli.Unavailable, err), false
	}
	return a, cli.OK, true
}
