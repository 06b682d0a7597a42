package applets

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/proc"
)

// hookedToolApplet is the hidden applet the sandbox's init runs, on the run
// host's order, for a brokered call of a third-party tool whose control
// directory has hooks: argv is NAME PATH ARGS... It runs the tool's pre
// hooks (a refusal ends the call, exit 13, layer hook), the tool itself as
// a child tree with this process's standard streams, environment and
// directory, then its post hooks, and exits with the tool's status. A
// builtin tool runs its hooks itself (tool.go); this gives a program of
// any kind the same two checks.
const hookedToolApplet = "ctx-hooked-tool"

// hasHooks reports whether the tool control directory dir has a pre or
// post hook.
func hasHooks(dir string) bool {
	return len(toolHooks(dir, "pre")) > 0 || len(toolHooks(dir, "post")) > 0
}

func runHookedTool(e *Env, args []string) int {
	if len(args) < 2 {
		return usageError(e, "%s NAME PATH [ARGS...]", hookedToolApplet)
	}
	name, path, rest := args[0], args[1], args[2:]
	dir := filepath.Join(filepath.Dir(path), name+".d")
	token := e.Getenv(fsops.BrokeredEnv)
	if errs := runHooks(e, dir, name, "pre", "", nil); len(errs) > 0 {
		cli.Deniedf(e.Stderr, name, "permission denied (hook): %v", errs[0])
		if token != "" {
			reportBrokeredCall(token, fsops.Event{Errno: "EACCES", Layer: "hook", Detail: errs[0].Error()})
		}
		return exitDenied
	}
	cmd := &exec.Cmd{Path: path, Args: append([]string{name}, rest...), Env: e.Environ(),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	tree, err := proc.StartTree(cmd)
	if err != nil {
		cli.Errorf(e.Stderr, name, "%v", err)
		return exitNotExec
	}
	// A cancel (SIGTERM from the init, Ctrl-C) ends the tool's whole tree.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			tree.Stop(time.Second)
		case <-done:
		}
	}()
	tree.Wait()
	close(done)
	code := exitStatus(cmd.ProcessState)
	status := "ok"
	if code != 0 {
		status = "error"
	}
	for _, herr := range runHooks(e, dir, name, "post", status, &code) {
		cli.Errorf(e.Stderr, name, "warning: %v", herr)
		if token != "" {
			reportBrokeredCall(token, fsops.Event{Detail: herr.Error()})
		}
	}
	return code
}
