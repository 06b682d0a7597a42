package lifecycle

import (
	"errors"
	"io/fs"
	"os"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// StartSessionPlace is where ctx agent start records the run's session:
// the agent's own sessions (home/UID/agent/NAME/session/), or with
// --shared SPACE the space's (shared/SPACE/agent/NAME/session/), which the
// seed lets a run use only when Linux permissions, mount visibility and
// policy v0 all allow it. So a shared session needs, before anything is
// written: an existing space; the full shared:SPACE write check for the
// agent (its uid and groups against the space's mode, the space visible
// and writable in its mount view, `allow SUBJECT shared:SPACE write`); and
// the caller, who writes the session as the run host, able to write the
// space. A refusal is exit 13 naming the layer.
func StartSessionPlace(e *cli.Env, root fsops.Root, a *policy.Agent, space string) (fsops.SessionPlace, int, bool) {
	if space == "" {
		return root.PrivateSessions(int(a.UID), a.Name), cli.OK, true
	}
	place, code, ok := SharedSessionPlace(e, root, a, space)
	if !ok {
		return place, code, false
	}
	if d := authority.SharedDecision(root, a, space, policy.PermWrite); !d.Allowed {
		return place, cli.Fail(e, cli.Denied, "agent %s: shared:%s write: permission denied (%s): %s", a.Name, space, d.Layer, d.Reason), false
	}
	if !fsops.MayCreateIn(root.SharedDir(space)) {
		return place, cli.Fail(e, cli.Denied, "agent %s: shared:%s write: permission denied (linux-permission): the caller, uid %d, who writes the session, cannot write %s",
			a.Name, space, os.Getuid(), root.SharedDir(space)), false
	}
	return place, cli.OK, true
}

// SharedSessionPlace checks --shared SPACE (a valid name of an existing
// space, not the docs bundle) and returns the agent's sessions there.
func SharedSessionPlace(e *cli.Env, root fsops.Root, a *policy.Agent, space string) (fsops.SessionPlace, int, bool) {
	if err := policy.ValidName(space); err != nil {
		return fsops.SessionPlace{}, cli.UsageError(e, "--shared: %s", err), false
	}
	if space == "cortexfs-docs" {
		return fsops.SessionPlace{}, cli.UsageError(e, "--shared: cortexfs-docs is the manual bundle, not a shared space"), false
	}
	dir := root.SharedDir(space)
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fsops.SessionPlace{}, cli.Fail(e, cli.Unavailable, "--shared %s: no such shared space (create it with: ctx shared new%s %s)", space, root.Option(), space), false
	case err != nil:
		return fsops.SessionPlace{}, cli.Fail(e, cli.Unavailable, "--shared %s: %v", space, err), false
	case !st.IsDir():
		return fsops.SessionPlace{}, cli.Fail(e, cli.Unavailable, "--shared %s: %s is not a directory (a %s)", space, dir, st.Mode().Type()), false
	}
	return root.SharedSessions(space, a.Name), cli.OK, true
}
