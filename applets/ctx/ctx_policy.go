package ctx

import (
	"errors"
	"fmt"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/policy"
)

// RunPolicyCheck is `ctx policy check FILE`: it parses FILE as a policy
// file (read like a control: regular, not through a symlink, at most
// 64 KiB; "-" reads standard input) and prints "valid N rules", or the
// first error with its line (exit 2).
func RunPolicyCheck(e *cli.Env, args []string) int {
	pos, code, ok := cli.ParseArgs(e, cli.NewFlags(), args, 1, 1)
	if !ok {
		return code
	}
	file := pos[0]
	var data []byte
	var err error
	if file == "-" {
		data, err = fsops.ReadLimited(e.Stdin, "-", fsops.ControlLimit)
	} else {
		data, err = fsops.ReadControl(file)
	}
	if err != nil {
		return cli.Fail(e, cli.Failure, "%s", describeIOError(err))
	}
	p, err := policy.ParsePolicy(data)
	if err != nil {
		var ce *policy.ControlError
		if errors.As(err, &ce) {
			// The file name replaces the control name "policy".
			return cli.Fail(e, cli.Usage, "%s", ce.In(file))
		}
		return cli.Fail(e, cli.Usage, "%s: %s", file, err)
	}
	fmt.Fprintf(e.Stdout, "valid %d rules\n", p.Len())
	return cli.OK
}

// describeIOError renders a read error with its errno name.
func describeIOError(err error) string {
	msg := cli.Escape(err.Error())
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg += " (" + unix.ErrnoName(errno) + ")"
	}
	return msg
}

// RunPolicyExplain is `ctx policy explain [--root DIR] AGENT CLASS:NAME
// PERM`: it runs the authority check for the agent as ctx would and prints
// every layer's verdict, then the decision. Exit 0 allowed, 13 denied, 2
// bad input, 127 unknown agent, 69 agent controls unusable.
func RunPolicyExplain(e *cli.Env, args []string) int {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, 3, 3)
	if !ok {
		return code
	}
	obj, err := policy.ParseObject(pos[1])
	if err != nil {
		return cli.UsageError(e, "%s (EINVAL)", err)
	}
	perm, err := policy.ParsePermission(obj.Class, pos[2])
	if err != nil {
		return cli.UsageError(e, "%s (EINVAL)", err)
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	a, code, ok := lifecycle.LoadAgent(e, root, pos[0])
	if !ok {
		return code
	}
	// The view explain can know from the host: the /ctx tree itself,
	// read-only, then the agent's own mount control, whose /ctx/... sources
	// are re-rooted as the sandbox plan re-roots them. The sandbox adds
	// system directories and /workspace, which hold no tools or shared
	// spaces.
	view := authority.View(root, a)
	var facts policy.Facts
	switch obj.Class {
	case policy.ClassTool:
		// The lookup goes over the tiers and tools the trust rule keeps
		// (DESIGN §16 rule 8); what it set aside for this name is shown
		// first, as layer tool-trust.
		tp := authority.TrustedToolDirs(root, a)
		tiers, tools := tp.SkippedFor(obj.Name)
		for _, s := range tiers {
			fmt.Fprintf(e.Stdout, "%s: skipped: %s: tier %s untrusted: %s\n", policy.LayerTrust,
				cli.Escape(path.Join(s.Tier, obj.Name)), cli.Escape(s.Tier), cli.Escape(s.Reason))
		}
		for _, s := range tools {
			fmt.Fprintf(e.Stdout, "%s: skipped: %s: untrusted: %s\n", policy.LayerTrust, cli.Escape(s.Tool), cli.Escape(s.Reason))
		}
		facts, _ = tp.ToolFacts(obj.Name)
	case policy.ClassShared:
		facts.File = authority.FileFacts(root.SharedDir(obj.Name))
	}
	d := policy.Check(a, view, obj, perm, facts)
	for _, v := range d.Verdicts {
		verdict := "allowed"
		if !v.Allowed {
			verdict = "refused"
		}
		fmt.Fprintf(e.Stdout, "%s: %s: %s\n", v.Layer, verdict, cli.Escape(v.Reason))
	}
	if d.Allowed {
		fmt.Fprintln(e.Stdout, "decision: allowed")
		return cli.OK
	}
	fmt.Fprintf(e.Stdout, "decision: denied by %s (%s)\n", d.Layer, unix.ErrnoName(d.Errno))
	return cli.Denied
}
