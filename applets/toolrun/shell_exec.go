package toolrun

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy"
)

// The bounds of shell.exec outside a sandbox, and the defaults inside one
// (the budgets tool_timeout_s and tool_output_bytes).
const (
	shellTimeout   = 20 * time.Second
	maxShellOutput = 64 << 10 // per stream
)

// shellLimits returns the timeout (0: none) and the output kept per stream
// of one shell.exec call. Inside a sandbox they are the run's budgets, read
// from /mnt/proc/budgets; a key the file does not give, or a file that is
// missing, unreadable or malformed, takes the default. Elsewhere they are
// the defaults.
func shellLimits(e *cli.Env) (time.Duration, int) {
	ctx, err := authority.Context(e.Getenv)
	if err != nil || ctx.Source != policy.ContextSandbox {
		return shellTimeout, maxShellOutput
	}
	var b policy.Budgets // nil: every key at its default
	if data, err := fsops.ReadRegular(policy.BudgetsPath, policy.MaxBudgetsFile); err == nil {
		if parsed, err := policy.ParseBudgetsFile(data); err == nil {
			b = parsed
		}
	}
	timeout := time.Duration(0)
	if s := b.Get("tool_timeout_s"); s < uint64(math.MaxInt64/int64(time.Second)) {
		timeout = time.Duration(s) * time.Second
	}
	output := math.MaxInt
	if n := b.Get("tool_output_bytes"); n < uint64(math.MaxInt) {
		output = int(n)
	}
	return timeout, output
}

var ShellExecTool = &BuiltinTool{
	Name:        "shell.exec",
	Description: "Run one bounded /bin/sh -c command: cleared environment, stdin /dev/null, own process group, 20 s timeout, 64 KiB output per stream (in a sandbox: the run's tool_timeout_s and tool_output_bytes budgets).",
	Cap:         "shell.exec",
	Grants:      writersGrants,
	Bare:        "cmd",
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"shell.exec input",` +
		`"type":"object","properties":{"cmd":{"type":"string","minLength":1}},"required":["cmd"],"additionalProperties":false}`,
	CLI: func(args []string, _ io.Reader) (map[string]any, error) {
		if len(args) == 0 {
			return nil, InputErr("usage: shell.exec CMD... (or JSON input)")
		}
		return map[string]any{"cmd": strings.Join(args, " ")}, nil
	},
	Run: shellExec,
}

// shellExec runs one command in named steps: start it (startShell), let a
// signal to the tool end its tree (cancelOnSignal), wait for it under the
// timeout (wait), collect its output (drain), then report (shellOutcome).
func shellExec(c *ToolCall) error {
	cmdText, _ := c.stringField("cmd")
	if strings.IndexByte(cmdText, 0) >= 0 {
		return InputErr("cmd contains a NUL byte")
	}
	timeout, maxOutput := shellLimits(c.Env)
	r, err := startShell(c.Env, cmdText, maxOutput)
	if err != nil {
		return err
	}
	// Notification stops only when the call returns, so a signal that
	// arrives while the output is written is still the tool's to ignore.
	defer r.cancelOnSignal()()
	r.wait(timeout)
	r.drain()
	return shellOutcome(c, r, timeout)
}

// shellRun is one shell.exec command from its start to its output.
type shellRun struct {
	cmd              *exec.Cmd
	tree             *proc.ChildTree
	stdoutR, stderrR *os.File
	out, err         *proc.Capped
	copies           sync.WaitGroup // the two copies from the pipes
	waited           chan struct{}  // closed when the tree is waited for
	cancelledBy      atomic.Int32   // the signal that cancelled the call
	timedOut         atomic.Bool
}

// startShell starts /bin/sh -c cmdText with its stdout and stderr copied
// into buffers of maxOutput bytes each.
func startShell(e *cli.Env, cmdText string, maxOutput int) (*shellRun, error) {
	cmd := exec.Command("/bin/sh", "-c", cmdText)
	cmd.Env = shellEnv(e)
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, FsErr(err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		stdoutR.Close()
		stdoutW.Close()
		return nil, FsErr(err)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	// The shell leads its own process group, and the tree ends whole with
	// the call: whatever it left running, in its group or in a session of
	// its own, is killed and reaped, so nothing outlives the call or holds
	// its output open.
	tree, err := proc.StartTree(cmd)
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdoutR.Close()
		stderrR.Close()
		return nil, ToolErr(syscall.ENOENT, cli.Unavailable, "cannot start /bin/sh: %v", err)
	}
	r := &shellRun{cmd: cmd, tree: tree, stdoutR: stdoutR, stderrR: stderrR,
		out: &proc.Capped{Limit: maxOutput}, err: &proc.Capped{Limit: maxOutput},
		waited: make(chan struct{})}
	r.copies.Add(2)
	go func() { defer r.copies.Done(); io.Copy(r.out, stdoutR) }()
	go func() { defer r.copies.Done(); io.Copy(r.err, stderrR) }()
	return r, nil
}

// cancelOnSignal makes SIGTERM, SIGINT or SIGHUP to the tool (Ctrl-C at a
// terminal, the run host cancelling a brokered call, ctx agent stop) end
// the command's whole tree, not only the tool: the command leads a process
// group of its own and would outlive it otherwise. It returns the function
// that stops the notification.
func (r *shellRun) cancelOnSignal() (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		select {
		case sig := <-sigs:
			r.cancelledBy.Store(int32(sig.(syscall.Signal)))
			r.tree.Kill()
		case <-r.waited:
		}
	}()
	return func() { signal.Stop(sigs) }
}

// wait waits for the tree, killing it after timeout (0: none).
func (r *shellRun) wait(timeout time.Duration) {
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() {
			r.timedOut.Store(true)
			r.tree.Kill()
		})
	}
	_ = r.tree.Wait() // the status is in cmd.ProcessState
	close(r.waited)
	if timer != nil {
		timer.Stop()
	}
}

// drain ends the copies from the pipes. Every writer is dead now, unless
// one got out of reach (see proc.ChildTree): its pipes are not worth more
// than a second.
func (r *shellRun) drain() {
	copied := make(chan struct{})
	go func() { r.copies.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	r.stdoutR.Close()
	r.stderrR.Close()
	<-copied
}

// shellOutcome writes the command's output (into the message of a native
// call, else to the caller's stdout and stderr) and says how the
// call ended: cancelled, timed out, failed (a native call), or its exit
// status.
func shellOutcome(c *ToolCall, r *shellRun, timeout time.Duration) error {
	code := ExitStatus(r.cmd.ProcessState)
	if c.Native {
		c.Out.Write(cappedOutput(r.out))
		c.Out.Write(cappedOutput(r.err))
	} else {
		c.Env.Stdout.Write(cappedOutput(r.out))
		c.Env.Stderr.Write(cappedOutput(r.err))
	}
	switch {
	case r.cancelledBy.Load() != 0:
		sig := syscall.Signal(r.cancelledBy.Load())
		return ToolErr(syscall.ECANCELED, cli.Signaled(sig), "command cancelled by %s", unix.SignalName(sig))
	case r.timedOut.Load():
		return ToolErr(syscall.ETIMEDOUT, cli.Signaled(syscall.SIGKILL), "command timed out after %s", timeout)
	case code != 0 && c.Native:
		return ToolErr(syscall.EIO, code, "command failed (exit %d)", code)
	}
	c.exit = code
	return nil
}

// shellEnv is the environment of a shell.exec command: cleared, then a fixed
// PATH and the few caller variables commands need to behave (HOME for git and
// friends, LANG for text). No CTX_* capability reaches the command.
func shellEnv(e *cli.Env) []string {
	env := []string{"PATH=/usr/bin:/bin", "GIT_OPTIONAL_LOCKS=0"}
	for _, k := range []string{"HOME", "LANG"} {
		if v := e.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// ExitStatus turns a process state into a shell-style exit status:
// the exit code, or 128+N for a death by signal N.
func ExitStatus(state *os.ProcessState) int {
	if state == nil {
		return cli.Internal
	}
	return proc.ExitCode(state)
}

// cappedOutput is what a capped stream kept, with a marker line when some
// of it was dropped.
func cappedOutput(b *proc.Capped) []byte {
	if !b.Truncated() {
		return b.Bytes()
	}
	return append(b.Bytes(), fmt.Sprintf("\n[truncated at %d bytes]\n", b.Limit)...)
}
