package tsh

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy"
	"ctx/ptyterm"
)

// cachedTool is what the path cache holds for a name: the lookup hit and
// the index of the CTX_PATH directory it came from.
type cachedTool struct {
	hit  fsops.ToolHit
	tier int
}

// resolve finds name through CTX_PATH, using the path cache. A cached hit
// is used only if it is still exactly what a fresh lookup would return:
// the file is the same inode and still a regular executable (lstat, no
// symlink followed), and no earlier CTX_PATH directory has gained a tool
// of that name. Otherwise the entry is stale and a fresh lookup replaces it.
func (sh *Shell) resolve(name string) (fsops.ToolHit, error) {
	if c, ok := sh.cache.Peek(name); ok {
		if sh.stillValid(name, c) {
			sh.cache.Access(name, c)
			return c.hit, nil
		}
		sh.cache.Remove(name)
	}
	hit, err := fsops.LookupTool(sh.dirs, name)
	if err != nil {
		return hit, err
	}
	tier := 0
	for i, d := range sh.dirs {
		if d == hit.Dir {
			tier = i
			break
		}
	}
	sh.cache.Access(name, cachedTool{hit, tier})
	return hit, nil
}

func (sh *Shell) stillValid(name string, c cachedTool) bool {
	for _, d := range sh.dirs[:c.tier] {
		if st, err := os.Lstat(filepath.Join(d, name)); err == nil && isExecutableFile(st) {
			return false
		}
	}
	st, err := os.Lstat(c.hit.Path)
	return err == nil && isExecutableFile(st) && sameFile(st, c.hit.Info)
}

func isExecutableFile(st fs.FileInfo) bool {
	return st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

func sameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// needsInput are the tools whose CLI reads its input from stdin when given
// no arguments. In the REPL stdin is where tsh reads its commands: on a
// terminal running one of them bare would look like a hang, and in a piped
// script it would read the rest of the script as its input.
var needsInput = map[string]bool{"fs.read": true, "fs.write": true, "shell.exec": true}

// runTool runs a tool: resolve, help, context, authority, then exec.
func (sh *Shell) runTool(name string, args []string) int {
	hit, err := sh.resolve(name)
	if err != nil {
		return sh.notFound(name, err, cli.NotFound)
	}
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		return sh.printToolHelp(hit)
	}
	// A context that is there but cannot be established (an unreadable
	// identity, a partial agent environment) refuses, naming why: tsh
	// never falls back to a person's view.
	switch ctx, err := detectContext(sh.env); {
	case err != nil:
		sh.deniedf("cannot execute %s: EACCES (agent-context): %v", name, err)
		sh.refused(hit, "denied", "EACCES", "agent-context", cli.Denied, "refused by tsh: no valid agent context")
		return cli.Denied
	case ctx.Source == policy.ContextNone:
		sh.errorf("cannot execute %s: no agent context; run it inside an agent sandbox (ctx agent start%s AGENT) or join one with ctx agent attach%s AGENT", name, sh.root.Option(), sh.root.Option())
		sh.refused(hit, "denied", "EACCES", "agent-context", cli.Unavailable, "refused by tsh: no agent context")
		return cli.Unavailable
	}
	if errno, layer, ok := authorize(sh.env, sh.root, hit); !ok {
		sh.deniedf("cannot execute %s: %s (%s)", name, errno, layer)
		sh.refused(hit, "denied", errno, layer, cli.Denied, "refused by tsh before execution")
		return cli.Denied
	}
	if sh.interactive && len(args) == 0 && needsInput[name] {
		if ptyterm.IsTerminal(sh.env.Stdin) {
			sh.errorf("%s needs input; pass arguments instead of leaving stdin open (see: help %s)", name, name)
		} else {
			sh.errorf("%s needs input; pass it as arguments: stdin is the rest of this script (see: help %s)", name, name)
		}
		return cli.Usage
	}
	sh.loaded.Touch(name)
	return sh.execTool(hit, args)
}

// execTool runs an authorized hit and waits for it. The executable is
// opened without following symlinks and must still be the inode the lookup
// (and the authority check) saw; it is then executed through that
// descriptor, so a rename or symlink swap after the check cannot substitute
// another program. argv[0] is the tool name, the tool's argv is args as
// given, stdio is inherited and the environment is toolEnviron's. The exit
// code is the tool's, or 128+N when signal N killed it.
func (sh *Shell) execTool(hit fsops.ToolHit, args []string) int {
	exe, st, code := sh.openChecked(hit)
	if exe == nil {
		return code
	}
	defer exe.Close()
	if code, ok := sh.runInProcess(hit, args, st); ok {
		return code
	}
	// A tool run with no arguments from a script piped into the REPL would
	// take the rest of the script as its input (a JSON tool reads its
	// object from stdin when argv has none): it gets an empty stdin, a pipe
	// already closed (no /dev/null needed), and the script goes on. A
	// terminal tool (bash, tmux, zellij) is a shell: like a program sh
	// starts, it reads the lines after its own from the same stdin, which
	// tsh has left unread (plainReader), and tsh goes on after it exits.
	stdin := sh.env.Stdin
	if sh.interactive && len(args) == 0 && !ptyterm.IsTerminal(stdin) && !terminalTool(hit) {
		r, w, err := os.Pipe()
		if err != nil {
			sh.errorf("cannot execute %s: %v", hit.Name, err)
			return cli.NotExec
		}
		w.Close()
		defer r.Close()
		stdin = r
	}
	// Inside a run with a broker the run host runs the call: asked from
	// here, no process of tsh's own is started for it.
	if sh.env.Tools != nil {
		call := ToolCall{Name: hit.Name, Object: hit.Path, Args: args, Env: toolEnviron(sh.env, sh.root, sh.dirs, hit),
			Stdin: stdin, Stdout: sh.env.Stdout, Stderr: sh.env.Stderr}
		if code, ok := sh.env.Tools.Brokered(call); ok {
			return code
		}
	}
	return sh.startTool(hit, args, exe, stdin)
}

// openChecked opens hit's executable without following a symlink and
// checks that it is still the inode the lookup (and the authority check)
// saw, a regular file with an execute bit. On failure it reports, records
// the refusal and returns a nil file and the exit code.
func (sh *Shell) openChecked(hit fsops.ToolHit) (*os.File, *unix.Stat_t, int) {
	exe, st, err := fsops.OpenExecutable(hit.Path)
	if err != nil {
		op := "open"
		var pe *os.PathError
		if errors.As(err, &pe) {
			op = pe.Op
		}
		sh.errorf("cannot execute %s: %s %s: %s", hit.Name, op, hit.Path, errnoName(err))
		sh.refused(hit, "error", eventErrno(err), "", cli.NotExec, "tsh could not "+op+" the tool")
		return nil, nil, cli.NotExec
	}
	want, _ := hit.Info.Sys().(*syscall.Stat_t)
	if want == nil || st.Dev != want.Dev || st.Ino != want.Ino || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		exe.Close()
		sh.errorf("cannot execute %s: %s changed after lookup", hit.Name, hit.Path)
		sh.refused(hit, "error", "ESTALE", "", cli.NotExec, "the tool changed after the authority check")
		return nil, nil, cli.NotExec
	}
	return exe, &st, cli.OK
}

// startTool executes the opened exe as hit's process and waits for it.
func (sh *Shell) startTool(hit fsops.ToolHit, args []string, exe *os.File, stdin io.Reader) int {
	// Child descriptors: 0-2 are ours, CTX_RUN_FD keeps its number, and the
	// executable goes in the first free slot after them. Slots left nil are
	// closed in the child.
	var extra []*os.File
	env := toolEnviron(sh.env, sh.root, sh.dirs, hit)
	if runFD, ok := runCapability(sh.env); ok {
		if f, err := fsops.DupAbove(runFD, 3, "run-capability"); err == nil {
			defer f.Close()
			extra = make([]*os.File, runFD-3+1)
			extra[runFD-3] = f
			env = append(env, "CTX_RUN_FD="+strconv.Itoa(runFD))
		}
	}
	exeSlot := 3 + len(extra)
	extra = append(extra, exe)
	cmd := &exec.Cmd{
		// The kernel resolves /proc/self/fd/N in the child to the opened
		// inode. The descriptor stays open in the tool (dup2 clears
		// close-on-exec), which an interpreter needs to read a #! script.
		Path:       "/proc/self/fd/" + strconv.Itoa(exeSlot),
		Args:       append([]string{hit.Name}, args...),
		Env:        env,
		Stdin:      stdin,
		Stdout:     sh.env.Stdout,
		Stderr:     sh.env.Stderr,
		ExtraFiles: extra,
	}
	// While the tool runs, a terminal's ^C or ^\ is for the tool. Catching
	// (not ignoring) the signals keeps tsh alive; caught signals revert to
	// the default in the child at exec, ignored ones would be inherited.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		if _, perr := os.Stat("/proc/self/fd"); perr != nil {
			sh.errorf("cannot execute %s: %s (tools are executed through /proc/self/fd; is /proc mounted?)", hit.Name, errnoName(err))
		} else {
			sh.errorf("cannot execute %s: %s", hit.Name, errnoName(err))
		}
		code := proc.StartFailure(err)
		sh.refused(hit, "error", eventErrno(err), "", code, "tsh could not start the tool")
		return code
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		sh.errorf("%s: %v", hit.Name, err)
		return cli.NotExec
	}
	return proc.ExitCode(cmd.ProcessState)
}

// runInProcess runs hit through Tools.InProcess when it may.
func (sh *Shell) runInProcess(hit fsops.ToolHit, args []string, st *unix.Stat_t) (int, bool) {
	if sh.env.Tools == nil || sh.interactive {
		return 0, false
	}
	self, err := fsops.Stat("/proc/self/exe")
	if err != nil {
		// Without /proc the running binary is found by its exec name.
		p, perr := fsops.Executable()
		if perr != nil {
			return 0, false
		}
		if self, err = fsops.Stat(p); err != nil {
			return 0, false
		}
	}
	if self.Dev != st.Dev || self.Ino != st.Ino {
		return 0, false
	}
	env := toolEnviron(sh.env, sh.root, sh.dirs, hit)
	if runFD, ok := runCapability(sh.env); ok {
		env = append(env, "CTX_RUN_FD="+strconv.Itoa(runFD))
	}
	return sh.env.Tools.InProcess(ToolCall{Name: hit.Name, Object: hit.Path, Args: args, Env: env,
		Stdin: sh.env.Stdin, Stdout: sh.env.Stdout, Stderr: sh.env.Stderr})
}

// toolEnvKeys are the variables a tool inherits from tsh's environment
// (the agent's environment); everything else is cleared. CTX_RUN_FD is
// added separately, only when its descriptor is really open.
var toolEnvKeys = []string{
	"CTX_HOME", "CTX_AGENT", "CTX_AGENT_SUBJECT", "CTX_SESSION", "CTX_RUN_ID",
	"HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG",
	// An iso landlock run names its broker and run directory (host
	// paths: it has no /mnt/proc).
	"CTX_BROKER", "CTX_RUN_DIR",
}

// toolEnviron builds a tool's environment: the allowlisted variables that
// are set, CTX_ROOT (the root tsh used), CTX_PATH (the process value, or
// the default tsh used when it was unset), CTX_TOOL_MODE=cli,
// CTX_AUTHORIZED_OBJECT (the executable's path) and PATH=/usr/bin:/bin.
func toolEnviron(e *Env, root fsops.Root, dirs []string, hit fsops.ToolHit) []string {
	env := []string{"CTX_ROOT=" + root.Dir}
	for _, k := range toolEnvKeys {
		if v := e.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	ctxPath := e.Getenv("CTX_PATH")
	if ctxPath == "" {
		ctxPath = joinPath(dirs)
	}
	return append(env,
		"CTX_PATH="+ctxPath,
		"CTX_TOOL_MODE=cli",
		"CTX_AUTHORIZED_OBJECT="+hit.Path,
		"PATH=/usr/bin:/bin",
	)
}

// runCapability returns CTX_RUN_FD when it names an open descriptor above
// stderr.
func runCapability(e *Env) (int, bool) {
	v := e.Getenv("CTX_RUN_FD")
	n, err := strconv.Atoi(v)
	if err != nil || n < 3 || strconv.Itoa(n) != v || n > 1<<16 {
		return 0, false
	}
	return n, fsops.FDOpen(n)
}

func joinPath(dirs []string) string {
	s := ""
	for i, d := range dirs {
		if i > 0 {
			s += ":"
		}
		s += d
	}
	return s
}

// errnoName reports an error as its errno name (EACCES) when it has one.
func errnoName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}

// eventErrno is the errno name of err for an event's errno field, which
// holds names only: EIO when err carries no errno.
func eventErrno(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return "EIO"
}
