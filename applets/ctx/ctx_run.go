package ctx

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/applets/runhost"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/policy"
	"ctx/ptyterm"
)

// RunRun is `ctx run [--root DIR] [--session S] AGENT -- tool TOOL [ARGS...]
// | policy show | audit tail [-f] [-n N]`: agentrc's CLI equivalents of
// /mnt/tools/TOOL, cat /mnt/proc/policy and cat /mnt/proc/audit. Against
// the agent's live run it asks that run's host (its broker, as a process
// inside the sandbox would) or reads its run directory; when the agent is
// not running it starts a short run of its own whose program is this same
// command, run inside. The exit status is the tool's, or ctx's own
// (2 bad input, 13 denied, 69 unavailable, 127 no such tool or agent).
func RunRun(e *cli.Env, args []string) int {
	var session string
	var allowHostRoot bool
	f := cli.NewFlags()
	f.String("session", &session)
	f.Bool("allow-host-root", &allowHostRoot)
	root, a, code, ok := lifecycle.AgentArgs(e, args, f)
	if !ok {
		return code
	}
	op, code, ok := parseRunOp(e, f.Command)
	if !ok {
		return code
	}

	// Inside a run (the short run below, or any program of an agent):
	// this run's own /mnt/proc and broker.
	ident, err := fsops.ReadControl(policy.IdentityPath)
	if err == nil {
		id, err := policy.ParseIdentity(ident)
		if err != nil {
			return cli.Fail(e, cli.Denied, "%s: %v", policy.IdentityPath, err)
		}
		if id.Agent != a.Name {
			return cli.Fail(e, cli.Denied, "inside agent %s's run, ctx run reaches that run only, not agent %s's", id.Agent, a.Name)
		}
		return op.inside(e, filepath.Dir(policy.IdentityPath))
	}
	if c, err := policy.DetectContext(nil, e.Getenv); err != nil {
		return cli.Fail(e, cli.Denied, "%v", err)
	} else if c.Source == policy.ContextEnvironment {
		if c.Agent != a.Name {
			return cli.Fail(e, cli.Denied, "inside agent %s's run, ctx run reaches that run only, not agent %s's", c.Agent, a.Name)
		}
		// iso landlock names its run's files (a host path); iso shared
		// has none.
		return op.inside(e, e.Getenv("CTX_RUN_DIR"))
	}

	uid := os.Getuid()
	if uid != 0 && uint32(uid) != a.Owner {
		return cli.Fail(e, cli.Denied, "agent %s belongs to uid %d; only its owner or root may reach its runs", a.Name, a.Owner)
	}
	if pid := lifecycle.RunHostPid(root, a.Name); pid != 0 {
		run, code, ok := lifecycle.FindLiveRun(e, root, a, pid)
		if !ok {
			return code
		}
		defer run.Close()
		if session != "" && session != run.Id.Session {
			return cli.UsageError(e, "--session %s: agent %s is running in session %s", session, a.Name, run.Id.Session)
		}
		return op.host(e, a, run)
	}
	return op.fresh(e, root, a, session, allowHostRoot)
}

// runOp is one ctx run command.
type runOp struct {
	verb   string   // tool, policy, audit
	tool   string   // tool: the tool's name
	args   []string // tool: its arguments
	follow bool     // audit: -f
	lines  int      // audit: -n
	argv   []string // the command as given after --
}

func parseRunOp(e *cli.Env, cmd []string) (runOp, int, bool) {
	op := runOp{argv: cmd, lines: 10}
	bad := func(format string, args ...any) (runOp, int, bool) {
		return op, cli.UsageError(e, format, args...), false
	}
	if len(cmd) == 0 {
		return bad("missing command after --: tool TOOL [ARGS...], policy show or audit tail [-f] [-n N]")
	}
	switch op.verb = cmd[0]; op.verb {
	case "tool":
		if len(cmd) < 2 {
			return bad("tool: missing TOOL")
		}
		if err := policy.ValidName(cmd[1]); err != nil {
			return bad("tool %s", cli.Escape(err.Error()))
		}
		op.tool, op.args = cmd[1], cmd[2:]
	case "policy":
		if len(cmd) != 2 || cmd[1] != "show" {
			return bad("policy: the one command is policy show")
		}
	case "audit":
		if len(cmd) < 2 || cmd[1] != "tail" {
			return bad("audit: the one command is audit tail [-f] [-n N]")
		}
		for i := 2; i < len(cmd); i++ {
			switch a := cmd[i]; {
			case a == "-f":
				op.follow = true
			case a == "-n" && i+1 < len(cmd):
				i++
				n, err := strconv.Atoi(cmd[i])
				if err != nil || n < 0 || strconv.Itoa(n) != cmd[i] {
					return bad("audit tail -n %s: not a count of lines", cli.Escape(cmd[i]))
				}
				op.lines = n
			default:
				return bad("audit tail: unexpected argument %s", cli.Escape(a))
			}
		}
	default:
		return bad("unknown command %s: tool TOOL [ARGS...], policy show or audit tail [-f] [-n N]", cli.Escape(op.verb))
	}
	return op, 0, true
}

// inside runs op in the agent's own run: procDir is its /mnt/proc
// (CTX_RUN_DIR in iso landlock), "" for iso shared, which has none.
func (op runOp) inside(e *cli.Env, procDir string) int {
	if op.verb == "tool" {
		// Through the broker, exactly as /mnt/tools/TOOL would be; without
		// one (iso shared, a broker that could not be bound) the way tsh
		// runs a tool.
		if code, ok := toolrun.BrokeredCall(e, op.tool, op.args); ok {
			return code
		}
		return toolrun.RunTsh(e, append([]string{op.tool}, op.args...))
	}
	if procDir == "" {
		return cli.Fail(e, cli.Unavailable, "this run has no /mnt/proc: iso shared shows an agent no /mnt at all, and no run files (ctx man agentrc)")
	}
	if op.verb == "policy" {
		return catRunFile(e, filepath.Join(procDir, "policy"))
	}
	return op.tail(e, filepath.Join(procDir, "audit"), nil)
}

// host runs op from the host against the agent's live run.
func (op runOp) host(e *cli.Env, a *policy.Agent, run *lifecycle.LiveRun) int {
	if op.verb != "tool" {
		// The run's files are read directly: the connection that found
		// the run is not kept waiting on its broker.
		fsops.CloseFD(run.Conn)
		run.Conn = -1
	}
	switch op.verb {
	case "tool":
		return run.Call(e, a, op.tool, op.args)
	case "policy":
		return catRunFile(e, filepath.Join(run.Dir, "policy"))
	}
	return op.tail(e, filepath.Join(run.Dir, "audit"), run.Ended)
}

// fresh starts a short run of the agent whose program is this command,
// run inside (the agent is not running). A person at a terminal (standard
// input and output both terminals) gets the run on a terminal, as ctx
// agent start gives it; otherwise the run's standard streams are pipes and
// a terminal on standard input is not read (a tool reads end of file).
func (op runOp) fresh(e *cli.Env, root fsops.Root, a *policy.Agent, session string, allowHostRoot bool) int {
	if op.verb == "audit" && op.follow {
		return cli.Fail(e, cli.Unavailable, "agent %s is not running: audit tail -f follows a live run's audit (start one with ctx agent start)", a.Name)
	}
	o := runhost.Options{Root: root, Agent: a.Name, Session: session, AllowHostRoot: allowHostRoot,
		Command: append([]string{"ctx", "run", a.Name, "--"}, op.argv...)}
	start := *e
	start.Name = "ctx run"
	if op.verb != "tool" || (ptyterm.IsTerminal(e.Stdin) && !ptyterm.IsTerminal(e.Stdout)) {
		start.Stdin = strings.NewReader("")
	}
	return runhost.Start(&start, o)
}

// catRunFile copies one file of a run directory to stdout, escaped line
// by line: the run's policy names tools, servers and paths an agent may
// have chosen (cli.Escape).
func catRunFile(e *cli.Env, path string) int {
	f, err := fsops.OpenRegular(path)
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "%v", err)
	}
	defer f.Close()
	if err := cli.CopyLines(e.Stdout, f); err != nil {
		return cli.Fail(e, cli.Failure, "%v", err)
	}
	return cli.OK
}

// tail prints the last op.lines lines of the audit file and, with -f, what
// is appended after, until ended reports the run over (inside a run, until
// interrupted). Only whole lines are printed, each escaped (cli.Escape):
// an audit line holds names and details an agent chose.
func (op runOp) tail(e *cli.Env, path string, ended func() bool) int {
	f, err := fsops.OpenRegular(path)
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "%v", err)
	}
	defer f.Close()
	start, err := lastLinesOffset(f, op.lines)
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "%s: %v", path, err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return cli.Fail(e, cli.Unavailable, "%s: %v", path, err)
	}
	r := bufio.NewReader(f)
	var partial []byte
	flush := func() error {
		for {
			chunk, err := r.ReadBytes('\n')
			partial = append(partial, chunk...)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if _, err := io.WriteString(e.Stdout, cli.EscapeLines(string(partial))); err != nil {
				return err
			}
			partial = partial[:0]
		}
	}
	if err := flush(); err != nil {
		return cli.Fail(e, cli.Failure, "%v", err)
	}
	if !op.follow {
		return cli.OK
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			return cli.Signaled(sig.(syscall.Signal))
		case <-tick.C:
		}
		over := ended != nil && ended()
		if err := flush(); err != nil {
			return cli.Fail(e, cli.Failure, "%v", err)
		}
		if over {
			return cli.OK
		}
	}
}

// lastLinesOffset finds where the last n lines of f begin (a final line
// without a newline counts as one), reading backwards in blocks.
func lastLinesOffset(f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := st.Size()
	if n == 0 {
		return end, nil
	}
	const block = 64 << 10
	buf := make([]byte, block)
	pos := end
	seen := 0
	last := true // the byte at end-1 ends the last line, not a line before it
	for pos > 0 {
		size := int64(block)
		if pos < size {
			size = pos
		}
		pos -= size
		if _, err := f.ReadAt(buf[:size], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := size - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				last = false
				continue
			}
			if last {
				last = false
				continue
			}
			if seen++; seen == n {
				return pos + i + 1, nil
			}
		}
	}
	return 0, nil
}
