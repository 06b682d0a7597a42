package ctx

import (
	"errors"
	"strings"
	"syscall"

	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/applets/tsh"
	"ctx/fsops"
)

// safeCoreTools are the only tools `ctx tool` runs directly: implemented
// inside ctx and bearing no authority beyond the caller's own file
// permissions. Running any other tool straight from CTX_PATH would skip the
// agent and tool authorization stack, so fs.write, shell.exec and every
// ordinary tool are refused.
var safeCoreTools = map[string]func(e *cli.Env, root fsops.Root, args []string) int{
	"tsh.config": toolrun.TshConfig,
}

// RunCtxTool is `ctx tool [--root DIR] NAME [ARG...]`. Options come before
// NAME; everything after NAME is the tool's.
func RunCtxTool(e *cli.Env, args []string) int {
	rootFlag := ""
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		a := args[0]
		if a == "--" {
			args = args[1:]
			break
		}
		if a == "--root" {
			if len(args) < 2 {
				return cli.UsageError(e, "option --root needs a directory")
			}
			rootFlag, args = args[1], args[2:]
		} else if v, ok := strings.CutPrefix(a, "--root="); ok {
			rootFlag, args = v, args[1:]
		} else {
			return cli.UsageError(e, "unknown option %s", a)
		}
	}
	if len(args) == 0 {
		return cli.UsageError(e, "missing tool NAME")
	}
	name := args[0]
	run, ok := safeCoreTools[name]
	if !ok {
		return cli.Fail(e, cli.Unavailable, "refusing %s: only safe core tools implemented inside ctx (tsh.config) run directly; run other tools through tsh inside an agent context (ctx agent start)", name)
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	dirs, err := tsh.ToolPath(toolrun.TshEnv(e), root)
	if err != nil {
		return cli.Fail(e, cli.Usage, "%v", err)
	}
	if _, err := fsops.LookupTool(dirs, name); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return cli.Fail(e, cli.NotFound, "tool not found in CTX_PATH: %s", name)
		}
		return cli.Fail(e, cli.Failure, "%v", err)
	}
	te := *e
	te.Name = name
	return run(&te, root, args[1:])
}
