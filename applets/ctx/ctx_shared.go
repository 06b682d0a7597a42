package ctx

import (
	"fmt"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/queue"
	"ctx/policy"
)

// RunSharedNew is `ctx shared new [--root DIR] SPACE`: create a shared
// space with its queue, idempotently, never through a symlink.
func RunSharedNew(e *cli.Env, args []string) int {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, 1)
	if !ok {
		return code
	}
	space := pos[0]
	if err := queue.ValidSpaceName(space); err != nil {
		return cli.Fail(e, cli.Usage, "space: %s", err)
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	if code := authorizeShared(e, root, space, "write"); code != cli.OK {
		return code
	}
	dir, _, err := queue.CreateSpace(root.Dir, space)
	if err != nil {
		return cli.Fail(e, QueueExit(err), "%v", err)
	}
	if q, err := queue.Open(root.Dir, space); err == nil {
		if w := q.FSWarning(); w != "" {
			cli.Warnf(e, "%s", w)
		}
		if err := q.CheckPrimitives(); err != nil {
			q.Close()
			return cli.Fail(e, QueueExit(err), "%v", err)
		}
		q.Close()
	}
	fmt.Fprintln(e.Stdout, dir)
	return cli.OK
}

// authorizeShared is the single authority check of shared spaces: may
// this process use space with perm ("read" or "write")? It returns cli.OK,
// or prints one line naming the refusing layer and returns cli.Denied.
//
// Outside an agent context (a person at a shell) only Linux permissions
// apply, and the kernel enforces them when the space is opened. Inside one
// (the sandbox identity file, or CTX_AGENT with CTX_SESSION and CTX_RUN_ID)
// policy.Check runs the shared:SPACE layers in the seed's order: the
// agent's uid/gid against the mode of shared/SPACE, its visibility (and
// writability) in the agent's mount view, then `allow SUBJECT shared:SPACE
// PERM` in agent/AGENT.d/policy. A context that cannot be established — an
// unreadable identity, an unknown agent, or a partial agent environment
// (policy.DetectContext names the missing variables) — refuses rather than
// runs unchecked.
func authorizeShared(e *cli.Env, root fsops.Root, space, perm string) int {
	deny := func(layer, reason string) int {
		return cli.Fail(e, cli.Denied, "shared:%s %s: permission denied (%s): %s", space, perm, layer, reason)
	}
	c, err := authority.CurrentCaller(e.Getenv)
	if err != nil {
		return deny("agent-context", err.Error())
	}
	if !c.InAgent() {
		return cli.OK
	}
	p, err := policy.ParsePermission(policy.ClassShared, perm)
	if err != nil {
		return cli.Fail(e, cli.Internal, "%v", err)
	}
	facts := policy.Facts{File: authority.FileFacts(root.SharedDir(space))}
	d := policy.Check(c.Agent, c.View(), policy.Object{Class: policy.ClassShared, Name: space}, p, facts)
	if d.Allowed {
		return cli.OK
	}
	if facts.File == nil && c.Context.Source == policy.ContextSandbox {
		// A sandbox holds only the spaces every layer allowed at start:
		// absent here is not absent on the host.
		return deny(string(d.Layer), "shared/"+space+" is not in this sandbox: a space is there only when every layer allowed it at start (on the host, ctx policy explain "+c.Agent.Name+" shared:"+space+" "+perm+" names the layer that refused)")
	}
	return deny(string(d.Layer), d.Reason)
}
