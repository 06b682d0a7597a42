package toolchain

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy"
)

// Refusal is the one line that says what of c's program the sandbox
// (of agent's run in iso, PATH sandboxPATH) does not show, and how to
// show it: the mount lines of root's agent/NAME.d/mount.
func (c *Check) Refusal(root fsops.Root, agent, iso, sandboxPATH string) string {
	in := " (iso " + iso + ")"
	var b strings.Builder
	switch {
	case c.Yours:
		fmt.Fprintf(&b, "%s is not on its sandbox's PATH (%s); yours has it at %s", c.Name, sandboxPATH, c.World)
		if c.Top {
			b.WriteString(", outside what the sandbox shows" + in)
		}
	case c.ByPATH:
		fmt.Fprintf(&b, "%s on its sandbox's PATH (%s) is %s, outside what the sandbox shows%s", c.Name, sandboxPATH, c.World, in)
	default:
		b.WriteString(c.World)
		if c.Top {
			b.WriteString(" is outside what its sandbox shows" + in)
		}
	}
	outside := c.Top || c.ByPATH
	var others []string
	for _, h := range c.Unshown {
		if h.Path != c.World {
			others = append(others, h.Path+" ("+hopWhy(h)+")")
		}
	}
	trees, tree := andList(c.ShimTrees()), "tree"
	if len(c.ShimTrees()) > 1 {
		tree = "trees"
	}
	shim, is := c.Shim || len(c.Trees) > 0, " is a shim: what it runs is chosen when it runs"
	if !c.Shim && !c.topInTrees() {
		// a shim further on: a #! line's `env node` that PATH finds in
		// volta's bin
		is = " runs a shim, which chooses what it runs when it runs"
	}
	switch {
	case shim && outside:
		fmt.Fprintf(&b, ", and it%s, in its %s %s, which the sandbox does not show either", is, tree, trees)
	case shim:
		fmt.Fprintf(&b, "%s, in its %s %s, which its sandbox does not show%s", is, tree, trees, in)
	case len(others) > 0 && outside:
		b.WriteString(", and so is what it runs: " + strings.Join(others, ", "))
	case len(others) > 0:
		b.WriteString(" runs what its sandbox does not show" + in + ": " + strings.Join(others, ", "))
	case c.Top && !c.Yours:
		b.WriteString(", so it is not found there")
	}
	if c.EnvHost != "" {
		fmt.Fprintf(&b, "; the #! line of %s runs %s by PATH, and its sandbox's PATH has none; yours has it at %s", c.Chain.EnvOf, c.Chain.EnvName, c.EnvHost)
	}
	return b.String() + "; fix: " + c.fix(root, agent)
}

// fix is the refusal's fix: the mount lines, and the PATH to set.
func (c *Check) fix(root fsops.Root, agent string) string {
	var b strings.Builder
	switch {
	case len(c.Dirs) > 0:
		b.WriteString(MountLinesFix(root, agent, c.Dirs))
	case !c.Yours:
		// What it needs lies in a directory too broad to show whole
		// (/, a home): the person chooses what of it to show.
		fmt.Fprintf(&b, "show what it needs, read-only, with lines of agent/%s.d/mount (ctx man policy, mount)", agent)
	}
	switch {
	case c.Yours && len(c.Dirs) > 0:
		fmt.Fprintf(&b, ", and run it by that path (or add its directory to PATH in agent/%s.d/env)", agent)
	case c.Yours:
		fmt.Fprintf(&b, "run it by that path (or add its directory to PATH in agent/%s.d/env)", agent)
	}
	if c.EnvHost != "" {
		fmt.Fprintf(&b, ", and add %s to PATH in agent/%s.d/env", filepath.Dir(c.EnvHost), agent)
	}
	return b.String()
}

// topInTrees reports whether a hop of the program itself lies in one of
// c's managers' trees.
func (c *Check) topInTrees() bool {
	for _, h := range c.Chain.Hops {
		if h.Top && policy.WithinAny(h.Path, c.Trees) {
			return true
		}
	}
	return false
}

// hopWhy says how the start comes to hop h.
func hopWhy(h proc.Hop) string {
	switch {
	case h.Why != "":
		return h.Why
	case h.Kind == proc.HopLink:
		return "a link on its path"
	}
	return "the program"
}

// MountLineFix says how to show host directory dir, read-only at the same
// path, in agent name's sandboxes: a line of its mount control (ctx man
// policy, mount), set by a command that keeps the lines it has, or
// --mount for one start.
func MountLineFix(root fsops.Root, name, dir string) string {
	return MountLinesFix(root, name, []string{dir})
}

// MountLinesFix is MountLineFix for several directories: a line each.
func MountLinesFix(root fsops.Root, name string, dirs []string) string {
	var quoted, once []string
	for _, d := range dirs {
		q := fsops.ShellQuote(d)
		quoted = append(quoted, q, q)
		once = append(once, "--mount "+q+" "+q+" ro")
	}
	args := strings.Join(quoted, " ")
	format, lines := `%s\t%s\tro\trbind,nosuid,nodev`, "a line"
	if len(dirs) > 1 {
		format, lines = format+`\n`, "lines"
	}
	value := fmt.Sprintf(`"$(printf '%s' %s)"`, format, args)
	file := filepath.Join(root.AgentControl(name), "mount")
	if b, _ := fsops.ReadControl(file); len(bytes.TrimSpace(b)) > 0 {
		// The lines it has, then the new ones, each on a line of its own.
		value = fmt.Sprintf(`"$(cat %s)$(printf '\n%s' %s)"`, fsops.ShellQuote(file), strings.TrimSuffix(format, `\n`), args)
	}
	return fmt.Sprintf(`show %s read-only with %s of agent/%s.d/mount: ctx set%s agent/%s.d/mount %s (or, for one start, %s)`,
		andList(dirs), lines, name, root.Option(), name, value, strings.Join(once, " "))
}

// andList is "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
