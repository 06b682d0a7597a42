package ctx

import (
	"fmt"
	"os"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/policy"
)

// ObjectVerb is the row's Run of `ctx object VERB` (check, install,
// inspect, uninstall): the verbs share their options and their output.
func ObjectVerb(verb string) func(e *cli.Env, args []string) int {
	return func(e *cli.Env, args []string) int { return runObject(e, verb, args) }
}

// runObject is `ctx object VERB ARGS`.
func runObject(e *cli.Env, verb string, args []string) int {
	var rootFlag, source, tier string
	var grants []string
	var yes bool
	f := cli.NewFlags()
	minPos, maxPos := 2, 2
	switch verb {
	case "check":
		minPos, maxPos = 1, 1
	case "install":
		minPos, maxPos = 1, 1
		f.List("grant", &grants)
		fallthrough
	case "inspect", "uninstall":
		f.String("root", &rootFlag)
		f.String("source", &source)
		f.String("tier", &tier)
		if verb == "uninstall" {
			f.Bool("yes", &yes)
		}
	}
	pos, code, ok := cli.ParseArgs(e, f, args, minPos, maxPos)
	if !ok {
		return code
	}
	if verb == "check" {
		m, err := object.Check(pos[0])
		if err != nil {
			return ObjectFail(e, err)
		}
		fmt.Fprintf(e.Stdout, "valid %s/%s\n", m.Class, m.Name)
		return cli.OK
	}
	if tier == "" {
		tier = "user"
	}
	if tier != "user" && tier != "system" {
		return cli.UsageError(e, "--tier %q is not user or system", tier)
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	if source == "" {
		// On disk the /ctx tree is the store (DESIGN §4): --source
		// defaults to the selected root.
		source = root.Dir
	}
	var agents []*policy.Agent
	if len(grants) > 0 {
		if agents, code, ok = grantAgents(e, root, source, pos[0], grants); !ok {
			return code
		}
	}
	t := object.Target{Source: source, Tier: tier, UID: os.Geteuid()}
	var (
		ins  *object.Installed
		err  error
		word = "installed"
	)
	switch verb {
	case "install":
		ins, err = object.Install(pos[0], t)
	case "inspect":
		ins, err = object.Inspect(t, pos[0], pos[1])
	case "uninstall":
		ins, err = object.Uninstall(t, pos[0], pos[1], yes)
		word = "would-uninstall"
		if yes {
			word = "uninstalled"
		}
	}
	if err != nil {
		return ObjectFail(e, err)
	}
	fmt.Fprintf(e.Stdout, "%s %s\n", word, cli.Escape(ins.Describe()))
	if len(agents) > 0 {
		return grantInstalled(e, root, ins, agents)
	}
	return cli.OK
}

// ObjectFail reports a lifecycle error: 2 for invalid input, 69 for
// conflicts and unavailable objects, by the one errno mapping first (13
// when the kernel refused with EACCES or EPERM, cli.ErrExit).
func ObjectFail(e *cli.Env, err error) int {
	code := cli.Unavailable
	if object.KindOf(err) == object.Invalid {
		code = cli.Usage
	}
	return cli.FailErr(e, code, err)
}
