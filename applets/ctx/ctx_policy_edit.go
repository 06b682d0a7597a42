package ctx

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// RunPolicyAllow is `ctx policy allow [--root DIR] --in FILE SUBJECT
// CLASS:NAME PERM`: append the rule to the policy control FILE unless a
// line of it already grants it.
func RunPolicyAllow(e *cli.Env, args []string) int { return editPolicy(e, args, true) }

// RunPolicyRevoke is `ctx policy revoke [--root DIR] --in FILE SUBJECT
// CLASS:NAME PERM`: remove every line of FILE stating the rule. Policy v0
// has no deny rule (what no line allows is denied), so revoking is how a
// grant is taken back.
func RunPolicyRevoke(e *cli.Env, args []string) int { return editPolicy(e, args, false) }

// editPolicy checks the rule with the policy grammar, then edits the file
// under its directory's lock (fsops.EditControl): the file is whole before
// and after, a concurrent edit is never lost, and a file that does not
// parse is left as it is.
func editPolicy(e *cli.Env, args []string, add bool) int {
	var rootFlag, in string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.String("in", &in)
	pos, code, ok := cli.ParseArgs(e, f, args, 3, 3)
	if !ok {
		return code
	}
	if in == "" {
		return cli.UsageError(e, "missing --in FILE: the policy to edit, agent/AGENT.d/policy (the agent's layer) or tool/TOOL.d/policy (the tool's)")
	}
	if c, err := authority.Context(e.Getenv); err != nil || c.Agent != "" {
		return cli.Fail(e, cli.Denied, "permission denied (agent-context): policies are the person's to change, from the host")
	}
	r, err := policy.ParseRule(pos[0], pos[1], pos[2])
	if err != nil {
		return cli.UsageError(e, "rule %s", strings.TrimPrefix(err.Error(), "policy: line 1: "))
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	p, err := root.ResolveABIPath(in)
	if err != nil {
		return cli.Fail(e, cli.Usage, "%v", err)
	}
	if filepath.Base(p) != "policy" || !strings.HasSuffix(filepath.Dir(p), ".d") {
		return cli.UsageError(e, "--in %s: not a policy control (want agent/AGENT.d/policy or tool/TOOL.d/policy)", in)
	}
	changed, err := fsops.EditControl(p, true, func(old []byte) ([]byte, error) {
		var out []byte
		var err error
		if add {
			out, _, err = policy.AddRule(old, r)
		} else {
			out, _, err = policy.RemoveRule(old, r)
		}
		return out, err
	})
	var ce *policy.ControlError
	switch {
	case errors.As(err, &ce):
		return cli.Fail(e, cli.Usage, "%s; fix it first (ctx policy check %s); nothing written", ce.In(in), in)
	case err != nil:
		return cli.FailErr(e, cli.Failure, err)
	}
	fmt.Fprintln(e.Stdout, policyEditReport(in, r, add, changed))
	return cli.OK
}

func policyEditReport(in string, r policy.Rule, add, changed bool) string {
	switch {
	case add && changed:
		return "added to " + cli.Escape(in) + ": " + r.String()
	case add:
		return "unchanged: " + cli.Escape(in) + " already has " + r.String()
	case changed:
		return "removed from " + cli.Escape(in) + ": " + r.String()
	}
	return "unchanged: " + cli.Escape(in) + " has no line " + r.String()
}
