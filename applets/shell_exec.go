package applets

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"ctx/fsops"
)

// The bounds of shell.exec.
const (
	shellTimeout   = 20 * time.Second
	maxShellOutput = 64 << 10 // per stream
)

var shellExecTool = &builtinTool{
	Name:        "shell.exec",
	Description: "Run one bounded /bin/sh -c command: cleared environment, stdin /dev/null, own process group, 20 s timeout, 64 KiB output per stream.",
	Cap:         "shell.exec",
	Grants:      writersGrants,
	Bare:        "cmd",
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"shell.exec input",` +
		`"type":"object","properties":{"cmd":{"type":"string","minLength":1}},"required":["cmd"],"additionalProperties":false}`,
	CLI: func(args []string, _ io.Reader) (map[string]any, error) {
		if len(args) == 0 {
			return nil, inputErr("usage: shell.exec CMD... (or JSON input)")
		}
		return map[string]any{"cmd": strings.Join(args, " ")}, nil
	},
	Run: shellExec,
}

func shellExec(c *toolCall) error {
	cmdText, _ := c.stringField("cmd")
	if strings.IndexByte(cmdText, 0) >= 0 {
		return inputErr("cmd contains a NUL byte")
	}
	cmd := exec.Command("/bin/sh", "-c", cmdText)
	cmd.Env = shellEnv(c.env)
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return fsErr(err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		stdoutR.Close()
		stdoutW.Close()
		return fsErr(err)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	// The shell leads its own process group, and the tree ends whole with
	// the call: whatever it left running, in its group or in a session of
	// its own, is killed and reaped, so nothing outlives the call or holds
	// its output open.
	tree, err := fsops.StartTree(cmd)
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdoutR.Close()
		stderrR.Close()
		return toolErr(syscall.ENOENT, exitUnavailable, "cannot start /bin/sh: %v", err)
	}
	var outBuf, errBuf cappedBuffer
	outBuf.limit, errBuf.limit = maxShellOutput, maxShellOutput
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); io.Copy(&outBuf, stdoutR) }()
	go func() { defer copies.Done(); io.Copy(&errBuf, stderrR) }()

	var timedOut atomic.Bool
	timer := time.AfterFunc(shellTimeout, func() {
		timedOut.Store(true)
		tree.Kill()
	})
	_ = tree.Wait() // the status is in cmd.ProcessState
	timer.Stop()
	state := cmd.ProcessState
	// Every writer is dead now, unless one got out of reach (see
	// fsops.ChildTree): its pipes are not worth more than a second.
	copied := make(chan struct{})
	go func() { copies.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	stdoutR.Close()
	stderrR.Close()
	<-copied

	code := exitStatus(state)
	if c.native {
		c.out.Write(outBuf.Bytes())
		c.out.Write(errBuf.Bytes())
	} else {
		c.env.Stdout.Write(outBuf.Bytes())
		c.env.Stderr.Write(errBuf.Bytes())
	}
	switch {
	case timedOut.Load():
		return toolErr(syscall.ETIMEDOUT, 128+int(syscall.SIGKILL), "command timed out after %s", shellTimeout)
	case code != 0 && c.native:
		return toolErr(syscall.EIO, code, "command failed (exit %d)", code)
	}
	c.exit = code
	return nil
}

// shellEnv is the environment of a shell.exec command: cleared, then a fixed
// PATH and the few caller variables commands need to behave (HOME for git and
// friends, LANG for text). No CTX_* capability reaches the command.
func shellEnv(e *Env) []string {
	env := []string{"PATH=/usr/bin:/bin", "GIT_OPTIONAL_LOCKS=0"}
	for _, k := range []string{"HOME", "LANG"} {
		if v := e.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// exitStatus turns a process state into a shell-style exit status:
// the exit code, or 128+N for a death by signal N.
func exitStatus(state *os.ProcessState) int {
	if state == nil {
		return exitInternal
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}

// cappedBuffer keeps the first limit bytes written to it and notes that more
// were dropped; writes never fail, so the writer is never blocked. (It wraps
// rather than embeds bytes.Buffer: an embedded ReadFrom would let io.Copy
// bypass the limit.)
type cappedBuffer struct {
	buf       bytes.Buffer
	limit     int
	truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.buf.Len(); room < len(p) {
		if room > 0 {
			b.buf.Write(p[:room])
		}
		b.truncated = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

// Bytes returns the kept output, with a marker line when some was dropped.
func (b *cappedBuffer) Bytes() []byte {
	if !b.truncated {
		return b.buf.Bytes()
	}
	return append(b.buf.Bytes(), fmt.Sprintf("\n[truncated at %d bytes]\n", b.limit)...)
}
