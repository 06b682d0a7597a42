package toolrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/proc"
)

// Hook bounds: a hook gets 5 seconds and its output is kept to 64 KiB (and
// then discarded: hooks decide, they do not talk to the caller).
const (
	hookTimeout   = 5 * time.Second
	maxHookOutput = 64 << 10
)

// hookInput is the one metadata-only JSON line a hook reads on stdin. It
// never carries the tool's input or output.
type hookInput struct {
	ABI     string `json:"abi"`
	Phase   string `json:"phase"`
	Tool    string `json:"tool"`
	Agent   string `json:"agent"`
	Session string `json:"session"`
	Run     string `json:"run"`
	Status  string `json:"status,omitempty"`
	Exit    *int   `json:"exit,omitempty"`
}

// toolHooks lists the runnable hooks of a phase in lexical order. Symlinks
// and files without an execute bit are skipped (ctx doctor reports them).
func toolHooks(controlDir, phase string) []string {
	if controlDir == "" {
		return nil
	}
	dir := filepath.Join(controlDir, "hooks", phase+".d")
	names, err := fsops.DirNames(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, name := range names {
		p := filepath.Join(dir, name)
		info, err := os.Lstat(p)
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// runHooks runs the hooks of one phase. For "pre" the first failing hook
// stops the call and is returned; "post" failures are collected.
func runHooks(e *cli.Env, dir, tool, phase string, status string, exit *int) []error {
	hooks := toolHooks(dir, phase)
	if len(hooks) == 0 {
		return nil
	}
	in, _ := json.Marshal(hookInput{ABI: "ctx.hook/v1", Phase: phase, Tool: tool,
		Agent: e.Getenv("CTX_AGENT"), Session: e.Getenv("CTX_SESSION"), Run: e.Getenv("CTX_RUN_ID"),
		Status: status, Exit: exit})
	var errs []error
	for _, h := range hooks {
		if err := runHook(h, append(in, '\n')); err != nil {
			errs = append(errs, fmt.Errorf("hook %s: %w", filepath.Base(h), err))
			if phase == "pre" {
				break
			}
		}
	}
	return errs
}

// runHook runs one hook in its own process group; the hook and everything
// it starts, in its group or not, end when it does (fsops.StartTree).
func runHook(path string, input []byte) error {
	cmd := exec.Command(path)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin = bytes.NewReader(input)
	out := proc.Capped{Limit: maxHookOutput}
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	tree, err := proc.StartTree(cmd)
	if err != nil {
		return err
	}
	var timedOut atomic.Bool
	timer := time.AfterFunc(hookTimeout, func() {
		timedOut.Store(true)
		tree.Kill()
	})
	err = tree.Wait()
	timer.Stop()
	if timedOut.Load() {
		return fmt.Errorf("timed out after %s", hookTimeout)
	}
	return err
}
