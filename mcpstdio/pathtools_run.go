package mcpstdio

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"ctx/fsops/proc"
)

// Running one call of a served tool: as a program started for it
// (runBounded), or in this process through PathTools.Run (runInProcess),
// its output bounded and collected the same way.

// truncated is what a bounded stream kept, with a marker line when some
// of it was dropped.
func truncated(b *proc.Capped) string {
	if b.Truncated() {
		return string(b.Bytes()) + fmt.Sprintf("\n[truncated: %d more bytes]\n", b.Dropped())
	}
	return string(b.Bytes())
}

// runResult is what a bounded run left: its output streams, how much of
// its standard output was dropped, and its exit status (128+N for a
// signal).
type runResult struct {
	stdout, stderr *proc.Capped
	status         int
}

// runInProcess runs a call through p.Run, its output bounded and
// collected as runBounded does for a program, within timeout.
func (p *PathTools) runInProcess(ctx context.Context, argv, env []string, stdin []byte, timeout time.Duration, onLine func([]byte)) (*runResult, bool, error) {
	if p.Run == nil {
		return nil, false, nil
	}
	res := &runResult{stdout: &proc.Capped{Limit: MaxNativeOutput, OnLine: onLine}, stderr: &proc.Capped{Limit: MaxCallOutput}}
	bounded, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	status, handled := p.Run(bounded, argv, env, stdin, res.stdout, res.stderr)
	switch {
	case !handled:
		return nil, false, nil
	case ctx.Err() != nil:
		return nil, true, fmt.Errorf("cancelled")
	case bounded.Err() != nil:
		return nil, true, fmt.Errorf("timed out after %v", timeout)
	}
	res.status = status
	return res, true, nil
}

// runBounded runs path with argv as a tree that ends whole with the call
// (proc.StartTree), stdin from the given bytes (nil: /dev/null), keeps at
// most outMax bytes of standard output (onLine sees each line of it as it
// comes) and MaxCallOutput of standard error, and stops the tree on
// timeout or cancellation (SIGTERM, CancelGrace, SIGKILL).
func runBounded(ctx context.Context, path string, argv, env []string, stdin []byte, timeout time.Duration, outMax int, onLine func([]byte)) (*runResult, error) {
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	} else {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		defer devnull.Close()
		in = devnull
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: in, Stdout: outW, Stderr: errW}
	tree, err := proc.StartTree(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("cannot run %s: %v", filepath.Base(path), err)
	}
	res := &runResult{stdout: &proc.Capped{Limit: outMax, OnLine: onLine}, stderr: &proc.Capped{Limit: MaxCallOutput}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(res.stdout, outR) }()
	go func() { defer wg.Done(); _, _ = io.Copy(res.stderr, errR) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var killed error
	grace := DefaultKillGrace
	select {
	case <-tree.Exited():
	case <-timer.C:
		killed, grace = fmt.Errorf("timed out after %v", timeout), CancelGrace
	case <-ctx.Done():
		killed, grace = fmt.Errorf("cancelled"), CancelGrace
	}
	// The tool's tree is ended in every case, so nothing it started
	// outlives the call: its group gets SIGTERM and a grace period, then
	// SIGKILL, and so does everything that left the group.
	tree.Stop(grace)
	_ = tree.Wait()
	// Every writer is dead unless one got out of reach; read what is left
	// in the pipes, and only then close them to unblock the copies.
	copied := make(chan struct{})
	go func() { wg.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	outR.Close()
	errR.Close()
	<-copied
	if killed != nil {
		return nil, killed
	}
	res.status = proc.ExitCode(cmd.ProcessState)
	return res, nil
}
