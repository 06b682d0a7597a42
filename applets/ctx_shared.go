package applets

import (
	"errors"
	"fmt"
	"os"

	"ctx/fsops"
	"ctx/fsops/queue"
	"ctx/ptyterm"
)

// runShared is `ctx shared new [--root DIR] SPACE`: create a shared space
// with its queue, idempotently, never through a symlink.
func runShared(e *Env, args []string) int {
	if len(args) == 0 {
		return usageError(e, "missing verb (new)")
	}
	if args[0] != "new" {
		return usageError(e, "unknown verb %q (new)", args[0])
	}
	e.Name = "ctx shared new"
	if len(args) == 2 && (args[1] == "--help" || args[1] == "-h") {
		return printHelp(e, "ctx-shared")
	}
	var rootFlag string
	f := newFlags()
	f.String("root", &rootFlag)
	pos, code, ok := parseArgs(e, f, args[1:], 1, 1)
	if !ok {
		return code
	}
	space := pos[0]
	if err := queue.ValidSpaceName(space); err != nil {
		return fail(e, exitUsage, "space: %s", ptyterm.Escape(err.Error()))
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	if code := authorizeShared(e, root, space, "write"); code != exitOK {
		return code
	}
	dir, _, err := queue.CreateSpace(root.Dir, space)
	if err != nil {
		return fail(e, queueExit(err), "%s", ptyterm.Escape(err.Error()))
	}
	fmt.Fprintln(e.Stdout, dir)
	return exitOK
}

// sharedAgentIdentity is where `ctx agent start` puts a sandboxed run's
// identity (policy.IdentityPath in the policy work).
const sharedAgentIdentity = "/mnt/proc/identity"

// inSharedAgentContext reports whether this process runs as an agent:
// CTX_AGENT is set (iso=shared runs) or the sandbox identity file exists.
func inSharedAgentContext(e *Env) bool {
	if e.Getenv("CTX_AGENT") != "" {
		return true
	}
	_, err := os.Lstat(sharedAgentIdentity)
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

// authorizeShared is the single integration point for the authority check
// of shared spaces: may this process use space with perm ("read" or
// "write")? It returns exitOK, or prints one line and returns exitDenied.
//
// Outside an agent context (a person at a shell) only Linux permissions
// apply; the kernel enforces them when the space is opened.
//
// Inside an agent context the check must run, in the seed's order: Linux
// uid/gid and mode bits of shared/SPACE (the kernel, at open), mount
// visibility of shared/SPACE in the agent's mount table, then policy v0
// `allow SUBJECT shared:SPACE PERM` in agent/AGENT.d/policy. That check is
// package policy's; until it is wired here an agent context is refused
// rather than trusted.
func authorizeShared(e *Env, root fsops.Root, space, perm string) int {
	if !inSharedAgentContext(e) {
		return exitOK
	}
	return fail(e, exitDenied, "shared:%s %s: denied in an agent context (EACCES): the shared-space policy check is not available in this build",
		space, perm)
}
