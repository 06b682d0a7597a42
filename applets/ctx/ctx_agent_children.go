package ctx

import (
	"fmt"
	"sort"

	"ctx/applets/cli"
	"ctx/applets/lifecycle"
)

// RunAgentChildren is `ctx agent children [--root DIR] NAME`: the agents
// whose parent control names NAME, one line each, as ctx agent ps prints
// them: NAME<TAB>STATUS<TAB>pid=PID<TAB>life=LIFE<TAB>parent=PARENT.
func RunAgentChildren(e *cli.Env, args []string) int {
	root, a, code, ok := lifecycle.AgentArgs(e, args, cli.NewFlags())
	if !ok {
		return code
	}
	kids := lifecycle.ChildrenOf(root, a.Name)
	sort.Slice(kids, func(i, j int) bool { return kids[i].Name < kids[j].Name })
	for _, k := range kids {
		status, pid := effectiveStatus(root, k.Name)
		pidText := "-"
		if pid > 0 {
			pidText = fmt.Sprint(pid)
		}
		fmt.Fprintf(e.Stdout, "%s\t%s\tpid=%s\tlife=%s\tparent=%s\n", cli.Escape(k.Name), cli.Escape(status), pidText, k.Life, cli.Escape(k.Parent.String()))
	}
	return cli.OK
}
