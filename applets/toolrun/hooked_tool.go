package toolrun

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"ctx/applets/cli"
	"ctx/fsops/proc"
)

// HookedToolApplet is the hidden applet the sandbox's init runs, on the run
// host's order, for a brokered call of a third-party tool whose control
// directory has hooks: argv is NAME PATH ARGS... It runs the program
// through the one tool runner (Execute) as a wrapped tool: its pre hooks (a
// refusal ends the call, exit 13, layer hook), the program itself as a
// child tree with this process's standard streams, environment and
// directory, then its post hooks, and it exits with the program's status.
// ctx's own tools run their hooks in the same runner; this gives a program
// of any kind the same two checks.
const HookedToolApplet = "ctx-hooked-tool"

// HasHooks reports whether the tool control directory dir has a pre or
// post hook.
func HasHooks(dir string) bool {
	return len(toolHooks(dir, "pre")) > 0 || len(toolHooks(dir, "post")) > 0
}

// RunHookedTool is the applet run by hand; on the host's order a tool
// worker runs HookedTool's call itself (Execute).
func RunHookedTool(e *cli.Env, args []string) int {
	t, rest, ok := HookedTool(e, args)
	if !ok {
		return cli.UsageError(e, "%s NAME PATH [ARGS...]", HookedToolApplet)
	}
	return RunTool(e, t, rest)
}

// HookedTool is the wrapped tool that ctx-hooked-tool's args (NAME PATH
// ARGS...) name, and the program's arguments; false when args are too few.
func HookedTool(e *cli.Env, args []string) (*BuiltinTool, []string, bool) {
	if len(args) < 2 {
		return nil, nil, false
	}
	name, path := args[0], args[1]
	e.Name = name
	return &BuiltinTool{Name: name, Ctl: filepath.Join(filepath.Dir(path), name+".d"), Passthrough: true, Wrapped: true,
		Run: func(c *ToolCall) error { return runProgram(c, path) }}, args[2:], true
}

// runProgram runs the program at path as the call's process tree and
// takes its exit status as the call's.
func runProgram(c *ToolCall, path string) error {
	cmd := &exec.Cmd{Path: path, Args: append([]string{c.tool.Name}, c.args...), Env: c.Env.Environ(),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	tree, err := proc.StartTree(cmd)
	if err != nil {
		te := *FsErr(err)
		te.Exit = proc.StartFailure(err)
		return &te
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
	c.exit = ExitStatus(cmd.ProcessState)
	return nil
}
