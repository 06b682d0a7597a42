package ctx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/policy"
	"ctx/ptyterm"
)

// RunAgentWatch is `ctx agent watch [--root DIR] NAME [--session S] [--shared SPACE] [--raw]`.
func RunAgentWatch(e *cli.Env, args []string) int { return joinTerminal(e, args, ptyterm.Watch) }

// RunAgentAttach is `ctx agent attach [--root DIR] NAME [--session S] [--shared SPACE] [--raw]`.
func RunAgentAttach(e *cli.Env, args []string) int { return joinTerminal(e, args, ptyterm.Attach) }

// joinTerminal connects to the session's terminal through its ABI locator,
// home/UID/agent/NAME/session/S/terminal/main.sock (with --shared SPACE,
// shared/SPACE/agent/NAME/session/S/terminal/main.sock), a symlink to the
// run's socket. The server must run as the agent's owner or root
// (SO_PEERCRED). The agent's output reaches the caller's terminal through
// ptyterm's ControlFilter (no clipboard, title or device control string),
// or as it is with --raw. The client proves the run's secret
// (ptyterm.ReadSecret).
func joinTerminal(e *cli.Env, args []string, mode ptyterm.Mode) int {
	var session, space string
	var raw bool
	f := cli.NewFlags()
	f.String("session", &session)
	f.String("shared", &space)
	f.Bool("raw", &raw)
	root, a, code, ok := lifecycle.AgentArgs(e, args, f)
	if !ok {
		return code
	}
	place := root.PrivateSessions(int(a.UID), a.Name)
	if space != "" {
		if place, code, ok = lifecycle.SharedSessionPlace(e, root, a, space); !ok {
			return code
		}
	}
	if session == "" {
		session = place.Current()
	}
	if session == "" {
		session = "default"
	}
	if err := policy.ValidName(session); err != nil {
		return cli.UsageError(e, "--session: %v", err)
	}
	locator := filepath.Join(place.SessionDir(session), "terminal", "main.sock")
	target, err := os.Readlink(locator)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cli.Fail(e, cli.Unavailable, "agent %s has no terminal in session %s (is it running? ctx agent status%s %s)", a.Name, session, root.Option(), a.Name)
	case err != nil:
		return cli.Fail(e, cli.Unavailable, "agent %s session %s: %v", a.Name, session, err)
	}
	// The run's secret, kept beside the socket where only its owner (and
	// root) can read it: without it the terminal refuses the client.
	secret, err := ptyterm.ReadSecret(target)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return cli.Fail(e, cli.Denied, "agent %s session %s: the terminal's secret cannot be read: %v", a.Name, session, err)
	}
	joinBanner(e, mode, a.Name, session)
	opts := ptyterm.ClientOptions{TrustedServerUIDs: []int{int(a.Owner), 0}, Secret: secret, Raw: raw}
	end, err := ptyterm.Connect(target, mode, e.Stdin, e.Stdout, opts)
	if err != nil {
		var refused *ptyterm.RefusedError
		if errors.As(err, &refused) {
			if refused.Reason == "busy" {
				// The one attach slot is most often the starting
				// terminal's own: the run's console holds it.
				return cli.Fail(e, cli.Unavailable, "%v; a run started on a terminal is attached to that terminal (its console): start it with --no-console to attach from elsewhere, or watch", err)
			}
			return cli.Fail(e, cli.Unavailable, "%v", err)
		}
		return cli.Fail(e, cli.Unavailable, "agent %s session %s: %v", a.Name, session, err)
	}
	if end == ptyterm.EndDetached {
		fmt.Fprintf(e.Stderr, "\r\n[detached from %s; it keeps running]\r\n", a.Name)
	}
	return cli.OK
}

// joinBanner tells a person on a terminal how to leave before the
// session's output fills the screen: on stderr, and only when stderr is a
// terminal (never into a pipe or a file a script reads). Attach names the
// detach sequence only when stdin is a terminal, where it is recognised.
func joinBanner(e *cli.Env, mode ptyterm.Mode, agent, session string) {
	if !ptyterm.IsTerminal(e.Stderr) {
		return
	}
	switch {
	case mode == ptyterm.Watch:
		fmt.Fprintf(e.Stderr, "[watching %s, session %s, read-only: Ctrl-C leaves; the agent keeps running]\r\n", agent, session)
	case ptyterm.IsTerminal(e.Stdin):
		fmt.Fprintf(e.Stderr, "[attached to %s, session %s: %s detaches; the agent keeps running]\r\n", agent, session, ptyterm.DetachSequence)
	default:
		fmt.Fprintf(e.Stderr, "[attached to %s, session %s: input from a pipe, no detach keys]\r\n", agent, session)
	}
}
