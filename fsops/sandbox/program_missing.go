package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy/sandboxplan"
)

// startFailure is the init's one line for a program that did not start.
// For ENOENT, which the kernel gives as well for a file that is there
// when the interpreter its #! line names, or the file a link leads to,
// is not, the line names the path of the program's chain the sandbox
// lacks (proc.ProgramChain, walked here, inside) and the mount that
// would show it: never a bare "fork/exec: no such file or directory".
func startFailure(plan *sandboxplan.Plan, exe string, err error) string {
	if !errors.Is(err, fs.ErrNotExist) {
		return err.Error()
	}
	pathVar := proc.EnvPath(plan.Env, "/usr/bin:/bin")
	if !strings.Contains(exe, "/") {
		return fmt.Sprintf("not found on its PATH (%s) in the sandbox (ctx man sandbox, YOUR TOOLCHAINS)", pathVar)
	}
	prog := exe
	if !filepath.IsAbs(prog) {
		prog = filepath.Join(plan.Cwd, prog)
	}
	look := func(name string) string {
		p, _ := proc.LookPath(name, pathVar)
		return p
	}
	c := proc.ProgramChain(prog, func(p string) string { return p }, look)
	for _, h := range c.Hops {
		if !h.Missing {
			continue
		}
		what := h.Path
		if h.Why != "" {
			what += " (" + h.Why + ")"
		}
		dir := proc.InstallDir(h.Path, "")
		q := fsops.ShellQuote(dir)
		return fmt.Sprintf("%s is not in the sandbox; where the host has it, show %s read-only with a line of the agent's mount control, or --mount %s %s ro for one start (ctx man sandbox, YOUR TOOLCHAINS)", what, dir, q, q)
	}
	if c.EnvName != "" {
		return fmt.Sprintf("the #! line of %s runs %s by PATH, which has none in the sandbox (%s)", c.EnvOf, c.EnvName, pathVar)
	}
	return err.Error()
}
