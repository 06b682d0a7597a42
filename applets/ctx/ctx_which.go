package ctx

import (
	"fmt"
	"os"

	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/applets/tsh"
	"ctx/fsops"
	"ctx/policy"
)

// RunWhich is `ctx which [--root DIR] tool NAME` (the executable CTX_PATH
// resolves, as standalone tsh would) and `ctx which agent NAME`.
func RunWhich(e *cli.Env, args []string) int {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, 2, 2)
	if !ok {
		return code
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	class, name := pos[0], pos[1]
	if err := policy.ValidName(name); err != nil {
		return cli.Fail(e, cli.Usage, "%v", err)
	}
	switch class {
	case "tool":
		dirs, err := tsh.ToolPath(toolrun.TshEnv(e), root)
		if err != nil {
			return cli.Fail(e, cli.Usage, "%v", err)
		}
		hit, err := fsops.LookupTool(dirs, name)
		if err != nil {
			return cli.Fail(e, cli.NotFound, "%s: not found in CTX_PATH", name)
		}
		fmt.Fprintln(e.Stdout, cli.Escape(hit.Path))
	case "agent":
		d := root.AgentControl(name)
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			return cli.Fail(e, cli.NotFound, "agent %s: no %s", name, d)
		}
		fmt.Fprintln(e.Stdout, cli.Escape(root.Path("agent", name)))
	default:
		return cli.UsageError(e, "unknown class %q (tool or agent)", class)
	}
	return cli.OK
}
