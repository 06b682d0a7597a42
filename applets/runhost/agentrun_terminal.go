package runhost

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
	"ctx/ptyterm"
)

// runOnTerminal runs the program on a PTY that ctxterm (package ptyterm)
// owns for the whole run: the caller's terminal is its console, the
// session's terminal socket lets others watch or attach, and the output is
// recorded in the session.
func (r *AgentRun) runOnTerminal(e *cli.Env, cmd *exec.Cmd, started func(int)) int {
	id := "terminal-" + r.Agent.Name + "-" + r.Session
	termDir := filepath.Join(r.Sess.TerminalDir, id)
	if err := fsops.MkdirNoFollow(termDir, r.Sess.DirMode); err != nil {
		return cli.Fail(e, cli.Unavailable, "terminal %s: %v", termDir, err)
	}
	sockets, err := fsops.TerminalDir(r.callerUID)
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "terminal socket directory: %v", err)
	}
	r.socket = fsops.TerminalSocketPath(sockets, r.treeKey, r.Agent.Name, r.Session)
	link := filepath.Join(r.Sess.TerminalDir, "main.sock")
	if err := replaceSymlink(r.socket, link); err != nil {
		return cli.Fail(e, cli.Unavailable, "terminal locator %s: %v", link, err)
	}
	defer os.Remove(link)
	cfg := r.terminalConfig(e)
	cfg.Cmd, cfg.Socket, cfg.Owner, cfg.Secret = cmd, r.socket, r.callerUID, r.secret
	cfg.Events, cfg.ID = filepath.Join(termDir, "events.jsonl"), id
	cfg.Log, cfg.Started, cfg.Start = e.Stderr, started, r.startFirst
	// A run without a console shows none of its output where it was
	// started: a person there is told where it went, and how it ended.
	banner := r.noConsole && ptyterm.IsTerminal(e.Stderr)
	if banner {
		cfg.Started = func(pid int) { started(pid); r.backgroundBanner(e) }
	}
	cfg.PTY = r.earlyPTY
	// record_bytes: past it the recording stops and the run goes on.
	if v := r.budgets.limits.Get("record_bytes"); v != policy.Unlimited {
		cfg.RecordLimit = int64(min(v, 1<<62))
		cfg.OnRecordLimit = func() {
			r.budgetExceeded("record_bytes", "terminal recording stopped; the run goes on")
		}
	}
	status, err := ptyterm.Serve(cfg)
	if err != nil {
		var se *ptyterm.SetupError
		if errors.As(err, &se) {
			return cli.Fail(e, cli.Unavailable, "terminal: %v", err)
		}
		cli.Errorf(e.Stderr, "ctx agent", "terminal: %v", err)
	}
	if banner {
		fmt.Fprintf(e.Stderr, "[%s's program ended: status %d]\n", r.Agent.Name, status)
	}
	return status
}

// backgroundBanner names, on the starting terminal of a run without a
// console, the commands that reach the run's terminal.
func (r *AgentRun) backgroundBanner(e *cli.Env) {
	target := r.Root.Option() + " " + r.Agent.Name
	if rel, err := filepath.Rel(r.Root.Path("shared"), r.Sess.Dir); err == nil && filepath.IsLocal(rel) {
		target += " --shared " + strings.SplitN(rel, string(filepath.Separator), 2)[0]
	}
	if r.Session != "default" {
		target += " --session " + r.Session
	}
	fmt.Fprintf(e.Stderr, "[%s runs without a console, its output is not shown here: ctx agent watch%s to see it, ctx agent attach%s to type (%s detaches)]\n",
		r.Agent.Name, target, target, ptyterm.DetachSequence)
}

// terminalConfig is how the run's PTY is made and its console kept: the
// console mode and input, and the slave's owner. The early init is
// started on a PTY made from it (ptyterm.OpenPTY), and ctxterm then
// serves it with the rest (runOnTerminal).
func (r *AgentRun) terminalConfig(e *cli.Env) ptyterm.Config {
	cfg := ptyterm.Config{ConsoleIn: e.Stdin, ConsoleOut: e.Stdout, ConsoleRaw: r.rawConsole}
	if r.iso == policy.IsoUID {
		// The agent runs as its own uid: its terminal is its own.
		cfg.TTYOwner = &[2]int{int(r.Agent.UID), int(r.Agent.GID)}
	}
	switch {
	case r.noConsole:
		// A background session: reachable only through its socket.
		cfg.Console = ptyterm.ConsoleNone
	case ptyterm.IsTerminal(e.Stdin):
		cfg.Console = ptyterm.ConsoleTTY
	default:
		cfg.Console = ptyterm.ConsolePipe
	}
	return cfg
}

// replaceSymlink points link at target, replacing an earlier symlink
// atomically (never a file that is not a symlink).
func replaceSymlink(target, link string) error {
	if st, err := os.Lstat(link); err == nil && st.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("exists and is not a symlink")
	}
	tmp := fsops.TempName(link)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
