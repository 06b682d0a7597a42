package ctx

import (
	"fmt"
	"path/filepath"
	"strings"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/policy"
)

// RunAgentNew is `ctx agent new NAME [--parent P] [--label L] [--perm rwx]
// [--tool T]... [--mount SRC DST ro|rw]... [--shared SPACE:read|write]...
// [--temp] [--grant]`: write a complete agent/NAME.d/, the agent/NAME entry
// and the home skeleton. With --parent the new agent must be an
// attenuation of its parent (ctx man policy). A tool is usable only when
// both its agent's policy and the tool's own allow it: --tool writes the
// first; --grant also adds the agent to each named tool's own policy (the
// person asks for both layers in one flag). Without --grant tool policies
// are never changed.
func RunAgentNew(e *cli.Env, args []string) int {
	var rootFlag, parentName, label, perm string
	var toolNames, sharedArgs []string
	var mountArgs [][]string
	var temp, grant bool
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.String("parent", &parentName)
	f.String("label", &label)
	f.String("perm", &perm)
	f.List("tool", &toolNames)
	f.List("shared", &sharedArgs)
	f.Tuple("mount", 3, &mountArgs)
	f.Bool("temp", &temp)
	f.Bool("grant", &grant)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	// Inside an agent context a new agent is an agent creating a child:
	// that is agent.create's, through the run host, with its grant and
	// attenuation. ctx agent new is the person's command.
	if c, err := authority.Context(e.Getenv); err != nil || c.Agent != "" {
		return cli.Fail(e, cli.Denied, "permission denied (agent-context): an agent creates a child with the agent.create tool, which its run host checks; ctx agent new is the host's command")
	}
	spec := lifecycle.AgentSpec{Name: pos[0], Parent: parentName, Label: label, Perm: perm, Tools: toolNames,
		Shared: sharedArgs, Mounts: mountArgs, Temp: temp, Meta: "created by ctx agent new"}
	child, te := lifecycle.CreateAgent(root, spec)
	if te != nil {
		if te.Exit == cli.Usage {
			return cli.UsageError(e, "%s", te.Msg)
		}
		return cli.Fail(e, te.Exit, "%s", te.Msg)
	}
	fmt.Fprintf(e.Stdout, "created agent/%s (subject %s, perm %s)\n", child.Name, child.Subject, child.Ceiling)
	scriptPermNote(e, root, child, spec.Tools)
	return grantToolLayers(e, root, child, spec.Tools, grant)
}

// scriptPermNote warns about a tool that is a script (#!) given to an
// agent whose perm has no x: the policy check allows the call (perm does
// not govern a tool that is not ctx's), but its interpreter cannot run in
// the sandbox, and the call fails with a bare EACCES.
func scriptPermNote(e *cli.Env, root fsops.Root, child *policy.Agent, tools []string) {
	if child.Ceiling.Has(policy.CeilingExec) {
		return
	}
	for _, t := range tools {
		if _, builtin := policy.CeilingFor(t); builtin {
			continue
		}
		_, hit := authority.ToolFacts(root, child, t)
		if hit.Path == "" {
			continue
		}
		if head, err := fsops.ReadRegular(hit.Path, 1<<20); err == nil && strings.HasPrefix(string(head), "#!") {
			// r too: a value starting with "-" would be read as an option.
			want := child.Ceiling | policy.CeilingExec | policy.CeilingRead
			cli.Errorf(e.Stderr, e.Name, "note: tool %s is a script: its interpreter runs only with perm x, and %s's perm is %s; give it x: ctx set%s agent/%s.d/perm %s",
				t, child.Name, child.Ceiling, rootOpt(root), child.Name, want)
		}
	}
}

// grantToolLayers handles the second layer of each tool a new agent was
// given: with grant, the rule goes into the tool's own policy (found
// through the agent's path, as its calls will find it); without, a tool
// that does not allow the agent gets a note naming the command that
// would. A tool policy that cannot be written (another owner's tool, a
// policy that does not parse) is an error (exit 1) after the agent is
// made: the agent stands, and the message says what is missing.
func grantToolLayers(e *cli.Env, root fsops.Root, child *policy.Agent, tools []string, grant bool) int {
	status := cli.OK
	for _, t := range tools {
		if lifecycle.ToolPolicyGrants(root, child, t) {
			continue
		}
		_, hit := authority.ToolFacts(root, child, t)
		if hit.ControlDir == "" {
			cli.Errorf(e.Stderr, e.Name, "note: tool %s is not in agent %s's path (ctx which %s); its own policy must also allow %s", t, child.Name, t, child.Subject)
			continue
		}
		in := filepath.Join(hit.ControlDir, "policy")
		if rel := root.RelPath(in); rel != "" {
			in = rel
		}
		rule := policy.Rule{Subject: child.Subject, Object: policy.Object{Class: policy.ClassTool, Name: t}, Permission: policy.PermExecute}
		if !grant {
			cli.Errorf(e.Stderr, e.Name, "note: tool %s does not allow %s in its own policy, so %s cannot call it yet; grant it with --grant, or: ctx policy allow%s --in %s %s tool:%s execute",
				t, child.Subject, child.Name, rootOpt(root), in, child.Subject, t)
			continue
		}
		_, err := fsops.EditControl(filepath.Join(hit.ControlDir, "policy"), true, func(old []byte) ([]byte, error) {
			out, _, err := policy.AddRule(old, rule)
			return out, err
		})
		if err != nil {
			cli.Errorf(e.Stderr, e.Name, "tool %s: could not grant %s in %s: %v", t, child.Subject, in, err)
			status = cli.Failure
			continue
		}
		fmt.Fprintf(e.Stdout, "granted in %s: %s\n", in, rule)
	}
	return status
}
