package ctx

import (
	"errors"
	"fmt"
	"path/filepath"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/policy"
)

// grantAgents are the agents `ctx object install --grant AGENT` names,
// loaded before anything is installed: a grant that cannot be made (not
// the person's command, a manifest that is no tool, a store other than
// the root, an agent that does not load) refuses the install, and nothing
// is written, neither the tool nor a policy. On failure it has printed the
// error and returns the exit code.
func grantAgents(e *cli.Env, root fsops.Root, source, manifest string, names []string) ([]*policy.Agent, int, bool) {
	if c, err := authority.Context(e.Getenv); err != nil || c.Agent != "" {
		return nil, cli.Fail(e, cli.Denied, "permission denied (agent-context): --grant changes policies, which are the person's to change, from the host"), false
	}
	m, err := object.Check(manifest)
	if err != nil {
		return nil, ObjectFail(e, err), false
	}
	if m.Class != "tool" {
		return nil, cli.UsageError(e, "--grant: %s is an agent; only a tool is granted to an agent", m.Name), false
	}
	if filepath.Clean(source) != filepath.Clean(root.Dir) {
		return nil, cli.UsageError(e, "--grant needs the tool installed in the tree its agents run from (%s), not --source %s", root.Dir, source), false
	}
	var agents []*policy.Agent
	for _, name := range names {
		a, code, ok := lifecycle.LoadAgent(e, root, name)
		if !ok {
			return nil, code, false
		}
		agents = append(agents, a)
	}
	return agents, cli.OK, true
}

// grantInstalled grants the installed tool ins to each agent in both
// policies a call needs: the agent's own (agent/AGENT.d/policy) and the
// tool's (its NAME.d/policy), each the atomic, idempotent edit of ctx
// policy allow. A grant that cannot be written is an error (exit 1) after
// the tool is installed: the tool stands, and the message says what is
// missing. An agent whose path does not lead to this tool gets a note.
func grantInstalled(e *cli.Env, root fsops.Root, ins *object.Installed, agents []*policy.Agent) int {
	status := cli.OK
	toolPolicy := filepath.Join(ins.ClassDir, ins.Name+".d", "policy")
	for _, a := range agents {
		rule := policy.Rule{Subject: a.Subject, Object: policy.Object{Class: policy.ClassTool, Name: ins.Name}, Permission: policy.PermExecute}
		for _, p := range []string{filepath.Join(root.AgentControl(a.Name), "policy"), toolPolicy} {
			in := p
			if rel := root.RelPath(p); rel != "" {
				in = rel
			}
			changed, err := fsops.EditControl(p, true, func(old []byte) ([]byte, error) {
				out, _, err := policy.AddRule(old, rule)
				return out, err
			})
			var ce *policy.ControlError
			switch {
			case errors.As(err, &ce):
				cli.Errorf(e.Stderr, e.Name, "--grant %s: %s; fix it first (ctx policy check %s); nothing written there", a.Name, ce.In(in), in)
				status = cli.Failure
				continue
			case err != nil:
				cli.Errorf(e.Stderr, e.Name, "--grant %s: could not grant in %s: %v", a.Name, in, err)
				status = cli.Failure
				continue
			}
			fmt.Fprintln(e.Stdout, policyEditReport(in, rule, true, changed))
		}
		if _, hit := authority.ToolFacts(root, a, ins.Name); filepath.Clean(hit.ControlDir) != filepath.Dir(toolPolicy) {
			cli.Errorf(e.Stderr, e.Name, "note: agent %s does not find this %s through its path (ctx which %s): add %s to agent/%s.d/path",
				a.Name, ins.Name, ins.Name, ins.ClassDir, a.Name)
		}
	}
	return status
}
