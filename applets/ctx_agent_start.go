package applets

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy"
	"ctx/ptyterm"
)

// stopGrace is how long a run gets between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// runAgentStart is `ctx agent start NAME [--session S] [--cwd PATH]
// [--mount SRC DST ro|rw]... [--terminal] [-- CMD ARGS]`. It stays in the
// foreground as the run host until the run ends, and exits with the
// program's status.
func runAgentStart(e *Env, args []string) int {
	return startAgentRun(e, args, nil)
}

// startAgentRun is ctx agent start; lock, when not nil, is the agent's run
// lock the caller took already (ctxmcp serve decides between starting and
// joining a run under it).
func startAgentRun(e *Env, args []string, lock *os.File) int {
	if lock != nil {
		defer lock.Close()
	}
	var session, sharedSpace, cwd string
	var mounts [][]string
	var forceTerminal, noConsole, showPlan, allowHostRoot bool
	// Descriptors the caller left open (a shell's 7</) must not reach the
	// sandbox or anything this run host starts.
	fsops.CloseInheritedOnExec()
	f := newFlags()
	f.String("session", &session)
	f.String("shared", &sharedSpace)
	f.String("cwd", &cwd)
	f.Tuple("mount", 3, &mounts)
	f.Bool("terminal", &forceTerminal)
	f.Bool("no-console", &noConsole)
	f.Bool("plan", &showPlan)
	f.Bool("allow-host-root", &allowHostRoot)
	root, a, code, ok := agentArgs(e, args, f)
	if !ok {
		return code
	}
	if !showPlan && lock == nil {
		// One run per agent at a time: the lock is held for the life of
		// this process, and released by the kernel however it ends. It
		// is taken first, before anything of the run is made.
		var err error
		if lock, err = lockAgent(root, a.Name); err != nil {
			// Running already: the program joins that run.
			if why := joinable(mounts, sharedSpace, cwd, forceTerminal); why != nil {
				return fail(e, exitUnavailable, "%v (%v shapes a new sandbox: it cannot join the running one)", err, why)
			}
			return joinRun(e, root, a, session, f.Command)
		}
		defer lock.Close()
	}
	r := &agentRun{stderr: e.Stderr, root: root, agent: a, callerUID: os.Getuid(), callerGID: os.Getgid(), allowHostRoot: allowHostRoot, planOnly: showPlan}
	defer r.closeIDMap()
	defer r.endBudgets()
	defer r.closeBroker()
	if code, ok := r.prepare(e, session, sharedSpace, cwd, mounts, f.Command); !ok {
		return code
	}
	if showPlan {
		// --plan: print the sandbox plan as JSON and start nothing.
		if r.runDir != "" {
			defer os.RemoveAll(r.runDir)
		}
		b, _ := json.MarshalIndent(r.plan, "", "  ")
		fmt.Fprintf(e.Stdout, "%s\n", b)
		return exitOK
	}
	r.noConsole = noConsole
	return r.run(e, forceTerminal || noConsole)
}

// prepare resolves everything the run needs and builds the plan. On
// failure it has printed one line and returns the exit status.
func (r *agentRun) prepare(e *Env, session, sharedSpace, cwd string, mountArgs [][]string, command []string) (int, bool) {
	a := r.agent
	if r.callerUID != 0 && uint32(r.callerUID) != a.Owner {
		return fail(e, exitDenied, "agent %s belongs to uid %d; only its owner or root may start it", a.Name, a.Owner), false
	}
	// A run needs /proc: its init finds the run's processes there to end
	// them, and the broker checks who calls it. Refused before anything
	// is written, as ctx doctor says.
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return fail(e, exitUnavailable, "agent %s: /proc is not mounted, and a run needs it (its init ends the run's processes and its broker checks its callers there); mount -t proc proc /proc", a.Name), false
	}
	if a.RunsAsHostRoot(uint32(r.callerUID)) && !r.allowHostRoot {
		why := "its uid is 0"
		if a.Isolation(uint32(r.callerUID)) == policy.IsoShared {
			why = "iso shared runs it as the caller, root"
		}
		return fail(e, exitDenied, "agent %s would run as host root (%s); give it an unprivileged uid (ctx set%s agent/%s.d/uid N) or start it with --allow-host-root", a.Name, why, r.root.Option(), a.Name), false
	}
	// The mode this run gets: the agent's iso control, auto without one
	// (the strongest this host allows: userns or uid, then landlock; never
	// shared unless asked for by name). A mode that cannot work here is
	// refused with the reason and what would work, before anything is
	// written or logged.
	req := a.Isolation(uint32(r.callerUID))
	iso, err := policy.ChooseIso(req, uint32(r.callerUID), fsops.ProbeIsolation(req == policy.IsoAuto))
	if err != nil {
		return fail(e, exitUnavailable, "agent %s: %v", a.Name, err), false
	}
	r.iso, r.isoAsked = iso, req
	canonical, err := canonicalDir(r.root.Dir)
	if err != nil {
		return fail(e, exitUnavailable, "root %s: %v", r.root.Dir, err), false
	}
	r.root.Dir = canonical
	// The session lives with the agent's own, or in a shared space.
	place, code, ok := startSessionPlace(e, r.root, a, sharedSpace)
	if !ok {
		return code, false
	}
	if session == "" {
		session = place.Current()
	}
	if session == "" {
		session = "default"
	}
	if err := policy.ValidName(session); err != nil {
		return usageError(e, "--session: %v", err), false
	}
	r.session = session
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fail(e, exitUnavailable, "current directory: %v", err), false
		}
		cwd = wd
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() || !filepath.IsAbs(cwd) {
		return usageError(e, "--cwd %s: not an existing absolute directory", cwd), false
	}
	if cwd, err = canonicalDir(cwd); err != nil {
		return fail(e, exitUnavailable, "workspace: %v", err), false
	}
	r.workspace = cwd
	// The workspace is the agent's to write: it must not hold the ctx
	// tree (the agent would rewrite its own controls, policy and tools)
	// nor lie inside it (it would write into the tree).
	if within(r.root.Dir, cwd) || within(cwd, r.root.Dir) {
		return fail(e, exitUnavailable, "agent %s: the workspace %s and the ctx tree %s overlap: the agent could rewrite its own controls; start it from a directory outside the tree (or use --cwd)", a.Name, cwd, r.root.Dir), false
	}
	var extra []policy.Mount
	for i, m := range mountArgs {
		mm, err := policy.ParseMounts([]byte(strings.Join(m, "\t") + "\t-\n"))
		if err != nil {
			return usageError(e, "--mount %d: %v", i+1, err), false
		}
		extra = append(extra, mm...)
	}

	if r.runtime, err = fsops.RuntimeDir(r.callerUID); err != nil {
		return fail(e, exitUnavailable, "runtime directory: %v", err), false
	}
	if r.runtime, err = canonicalDir(r.runtime); err != nil {
		return fail(e, exitUnavailable, "runtime directory: %v", err), false
	}
	// The agent's home exists whatever its uid was set to since bootstrap;
	// in uid mode the agent owns the parts of it that it writes.
	if _, err := r.root.EnsureAgentHome(int(a.UID), int(a.GID), a.Name, r.callerUID == 0 && a.UID != 0); err != nil {
		return fail(e, exitUnavailable, "agent %s home: %v", a.Name, err), false
	}
	r.runID = fsops.NewRunID()
	// Two parts of the preparation that depend on nothing else run beside
	// the rest, on another core: reading the tools the agent may run (the
	// trust rule examines each one's control tree) and, in uid mode, the
	// idmapped workspace (a process started and killed for its user
	// namespace). Each was a quarter of the run host's work before the
	// sandbox starts. Both are waited for before prepare returns.
	var tools []policy.ProjectedTool
	var policyLines []string
	toolsRead := make(chan struct{})
	go func() {
		defer close(toolsRead)
		tools, policyLines = projectTools(r.root, a)
		withToolSpecs(tools)
	}()
	defer func() { <-toolsRead }()
	var idmap *policy.IDMap
	idmapWhy := ""
	idmapMade := make(chan struct{})
	go func() {
		defer close(idmapMade)
		if r.iso == policy.IsoUID {
			op := policy.WritableBind(a, policy.Op{Kind: policy.OpBind})
			idmap, r.idmapTree, idmapWhy = r.workspaceIDMap(op)
		}
	}()
	defer func() { <-idmapMade }()
	r.startBudgets(r.planOnly)
	r.sess, err = r.root.EnsureSessionAt(place, a.Name, session, policy.SandboxWorkspace, cwd)
	if err != nil {
		return fail(e, exitUnavailable, "session %s: %v", session, err), false
	}

	<-toolsRead
	r.tools = tools
	shared, sharedLines := sharedGrants(r.root, a)
	network := networkGranted(a)
	policyLines = append(policyLines, sharedLines...)
	var skills runSkills
	if r.iso != policy.IsoShared {
		var skillLines []string
		if skills, skillLines, err = gatherSkills(r.root, a, shared); err != nil {
			return fail(e, exitUnavailable, "agent %s: %v", a.Name, err), false
		}
		policyLines = append(policyLines, skillLines...)
	}
	if network {
		policyLines = append(policyLines, "network:default connect granted")
	} else {
		policyLines = append(policyLines, "network:default connect rejected agent-policy")
	}
	r.collectExecutables()

	r.env = policy.SandboxEnv(a, policy.RunSettings{Session: session, Run: r.runID,
		Term: e.Getenv("TERM"), Lang: e.Getenv("LANG")})
	r.env = append(r.env, "CTX_RUN_FD="+strconv.Itoa(fsops.RunFD))
	exe := ""
	r.argv = command
	if len(r.argv) == 0 {
		r.argv, exe = []string{"tsh"}, policy.SandboxRoot+"/bin/ctx"
	}
	if r.iso == policy.IsoShared {
		return r.prepareShared(e, exe)
	}

	<-idmapMade
	protectLines, err := r.gatherProtect()
	if err != nil {
		return fail(e, exitUnavailable, "agent %s: %v", a.Name, err), false
	}
	policyLines = append(policyLines, protectLines...)
	policyLines = append(policyLines, r.wallLines(idmapWhy)...)
	if err := r.writeRunDir(policyLines); err != nil {
		return fail(e, exitUnavailable, "run directory: %v", err), false
	}
	var static []string
	for _, l := range policyLines {
		if !strings.HasPrefix(l, "tool:") && !strings.HasPrefix(l, "tool ") && !strings.HasPrefix(l, "tier ") {
			static = append(static, l)
		}
	}
	if !r.planOnly {
		if err := r.startBroker(static); err != nil {
			// Tools then run in the calling process, as before the broker.
			fsops.AppendLine(filepath.Join(r.runDir, "policy"), []byte("sandbox broker unavailable: "+err.Error()+"\n"))
		} else {
			// Every call is the broker's to record: no run capability.
			r.env = withoutVar(r.env, "CTX_RUN_FD")
		}
	}
	home := r.root.AgentHome(int(a.UID), a.Name)
	if r.iso == policy.IsoLandlock {
		return r.prepareLandlock(e, exe, home, extra, tools, shared, network)
	}
	newRoot := filepath.Join(home, "root")
	if a.Root != "" {
		newRoot = authority.Reroot(r.root, a.Root)
	}
	if err := fsops.MkdirNoFollow(newRoot, 0o700); err != nil {
		return fail(e, exitUnavailable, "agent root %s: %v", newRoot, err), false
	}
	in := policy.PlanInput{
		Agent: a, Iso: string(r.iso), CallerUID: uint32(r.callerUID), CallerGID: uint32(r.callerGID),
		RootDir: r.root.Dir, NewRoot: newRoot, RootFS: hasRootFS(newRoot), SystemDirs: systemDirs(), Etc: hostEtc(),
		Workspace: cwd, WorkspaceIDMap: idmap, AgentHome: home, Extra: extra, Tools: tools, Shared: shared,
		ProcDir: r.runDir, SkillsDir: skills.Dir, Skills: skills.List, SOP: r.sop, Network: network,
		Budgets: r.budgets.limits, Cgroup: r.budgets.cgroup != nil,
		Cwd: a.Cwd, Env: r.env, Argv: r.argv, Exe: exe,
	}
	in.Protect = &r.protect.wp
	if r.plan, err = policy.BuildPlan(in); err != nil {
		return fail(e, exitUnavailable, "%v", err), false
	}
	r.plan.Worker = r.workerPath(policy.SandboxRoot + "/bin/ctx")
	return 0, true
}

// prepareShared is iso=shared: no namespaces at all. The program runs as
// the caller, in the workspace, and knows it is an agent only from
// CTX_AGENT, CTX_SESSION and CTX_RUN_ID, which any process of the same uid
// could set too.
func (r *agentRun) prepareShared(e *Env, exe string) (int, bool) {
	home := r.root.AgentHome(int(r.agent.UID), r.agent.Name)
	r.env = r.hostPathEnv(home)
	// Protected paths: Landlock write rules from /, applied by ctx-confine.
	protectLines, err := r.gatherProtect()
	if err == nil {
		err = r.protectShared(protectLines)
	}
	if err != nil {
		return fail(e, exitUnavailable, "agent %s: %v", r.agent.Name, err), false
	}
	if exe != "" {
		self, err := fsops.Executable()
		if err != nil {
			return fail(e, exitInternal, "%v", err), false
		}
		r.argv = []string{self, "tsh"}
		return 0, true
	}
	if code, ok := r.resolveSharedProgram(e); !ok {
		return code, false
	}
	return 0, true
}

// hostPathEnv is the agent's environment with the sandbox's paths (/ctx,
// /home/agent, /ctx/bin on PATH) replaced by the host paths they stand
// for: a run without mounts (iso shared, iso landlock) sees the host's.
func (r *agentRun) hostPathEnv(home string) []string {
	var env []string
	for _, kv := range r.env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CTX_ROOT":
			kv = "CTX_ROOT=" + r.root.Dir
		case "CTX_HOME":
			kv = "CTX_HOME=" + r.root.Home(int(r.agent.UID))
		case "CTX_PATH":
			kv = "CTX_PATH=" + strings.Join(authority.ToolDirs(r.root, r.agent), ":")
		case "HOME":
			kv = "HOME=" + home
		case "PATH":
			kv = "PATH=" + sharedPATH(r.root, strings.TrimPrefix(kv, "PATH="))
		}
		env = append(env, kv)
	}
	return env
}

// prepareLandlock is iso landlock: no namespaces and no mounts, the
// program restricted by Landlock to what its sandbox would have mounted,
// behind seccomp and its limits, run by the same init as every sandbox
// (which brokers its tool calls too). It finds the tree at CTX_ROOT, its
// run's files at CTX_RUN_DIR and the broker at CTX_BROKER, host paths; its
// temporary files go to TMPDIR in its home.
func (r *agentRun) prepareLandlock(e *Env, exe, home string, extra []policy.Mount, tools []policy.ProjectedTool,
	shared []policy.SharedGrant, network bool) (int, bool) {
	a := r.agent
	tmp := filepath.Join(home, "tmp")
	if err := fsops.MkdirNoFollow(tmp, 0o700); err != nil {
		return fail(e, exitUnavailable, "agent %s: %s: %v", a.Name, tmp, err), false
	}
	if r.callerUID == 0 && a.UID != 0 {
		os.Lchown(tmp, int(a.UID), int(a.GID))
	}
	r.env = append(r.hostPathEnv(home), "CTX_RUN_DIR="+r.runDir,
		"CTX_BROKER="+filepath.Join(r.runDir, fsops.BrokerSocketName), "TMPDIR="+tmp)
	if exe != "" {
		exe = r.root.Path("bin", "ctx")
	}
	in := policy.PlanInput{
		Agent: a, Iso: string(r.iso), CallerUID: uint32(r.callerUID), CallerGID: uint32(r.callerGID),
		RootDir: r.root.Dir, SystemDirs: systemDirs(), Workspace: r.workspace, AgentHome: home, Extra: extra,
		Tools: tools, Shared: shared, ProcDir: r.runDir, Network: network,
		Budgets: r.budgets.limits, Cgroup: r.budgets.cgroup != nil, HostTiers: authority.ToolDirs(r.root, a),
		Cwd: a.Cwd, Env: r.env, Argv: r.argv, Exe: exe, Protect: &r.protect.wp,
	}
	var err error
	if r.plan, err = policy.BuildLandlockPlan(in); err != nil {
		return fail(e, exitUnavailable, "%v", err), false
	}
	if err := r.protectLandlockPlan(); err != nil {
		return fail(e, exitUnavailable, "agent %s: %v", a.Name, err), false
	}
	r.plan.Worker = r.workerPath(r.root.Path("bin", "ctx"))
	return 0, true
}

// hasRootFS reports whether an agent's root directory holds a root
// filesystem of its own (then it is the new root; else a fresh tmpfs is).
func hasRootFS(dir string) bool {
	for _, d := range []string{"usr", "bin"} {
		if _, err := os.Lstat(filepath.Join(dir, d)); err == nil {
			return true
		}
	}
	return false
}

// lockAgent takes the agent's run lock: an exclusive flock on its control
// directory, held until the returned file is closed.
func lockAgent(root fsops.Root, name string) (*os.File, error) {
	f, err := os.OpenFile(root.AgentControl(name), os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if err := fsops.TryLock(f); err != nil {
		f.Close()
		pid, _ := fsops.ReadControl(filepath.Join(root.AgentControl(name), "pid"))
		return nil, fmt.Errorf("agent %s is already running (pid %s); stop it with ctx agent stop%s %s", name, strings.TrimSpace(string(pid)), root.Option(), name)
	}
	return f, nil
}

// run starts the program and hosts the run until it ends.
func (r *agentRun) run(e *Env, forceTerminal bool) int {
	runcap, err := fsops.NewRunCapability()
	if err != nil {
		return fail(e, exitUnavailable, "run capability: %v", err)
	}
	defer runcap.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		runcap.Serve(authority.MaxRunMessage, func(pid int, msg []byte, ack *os.File) {
			err := r.handleRunMessage(pid, msg)
			fsops.Acknowledge(ack, err == nil)
			if err != nil {
				cli.Errorf(e.Stderr, "ctx agent", "run capability: %v", err)
			}
		})
	}()

	var cmd *exec.Cmd
	var sandbox *fsops.Sandbox
	if r.plan != nil {
		if sandbox, err = fsops.NewSandbox(r.plan); err != nil {
			return fail(e, exitUnavailable, "%v", err)
		}
		if r.broker == nil {
			// Without a broker tools report their calls over the run
			// capability; with one, no agent process holds it.
			sandbox.SetRunFile(runcap.Child)
		}
		if r.idmapTree != nil {
			sandbox.SetIDMappedWorkspace(r.idmapTree)
		}
		if r.broker != nil {
			sandbox.SetBrokerChannel(r.broker.init)
		}
		cmd = sandbox.Cmd
	} else {
		// The program is looked up in the caller's PATH; not found, it
		// is left as named, for the trampoline's exec to fail on.
		cmd = &exec.Cmd{Path: r.argv[0], Args: append([]string(nil), r.argv...)}
		if p, err := proc.LookPath(r.argv[0], e.Getenv("PATH")); err == nil && r.argv[0] != "" {
			cmd.Path = p
		}
		cmd.Args[0] = filepath.Base(r.argv[0])
		// No namespaces, but no new privileges and the seccomp filter:
		// the program starts through ctx's confining trampoline.
		self, err := fsops.Executable()
		if err != nil {
			return fail(e, exitUnavailable, "agent %s: cannot find ctx itself to confine the program: %v", r.agent.Name, err)
		}
		network := fsops.ConfineNoNetwork
		if networkGranted(r.agent) {
			network = fsops.ConfineNetwork
		}
		cmd = &exec.Cmd{Path: self, Args: append([]string{fsops.ConfineApplet, network, cmd.Path}, cmd.Args...)}
		cmd.Env, cmd.Dir = r.env, r.workspace
		cmd.ExtraFiles = []*os.File{runcap.Child}
		// A session of its own: never the caller's controlling terminal.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	}

	r.setStatus("start", os.Getpid())
	r.recordEvent(fsops.Event{Type: "agent.start", Object: "agent/" + r.agent.Name, Status: "ok",
		Detail: fmt.Sprintf("iso=%s%s workspace=%s model=%s life=%s", r.iso, r.isoNote(), r.workspace, r.agent.Model, r.agent.Life) + r.protectEventNote()})

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)

	stopWatch := make(chan struct{})
	started := func(pid int) {
		// The plan goes at once: the init builds the sandbox while it is
		// put into the run's cgroup (a cgroup v1 attach can take
		// milliseconds), and starts the program only when released, so
		// every process of the run is born inside.
		if sandbox != nil {
			sandbox.SendPlan()
		}
		if cg := r.budgets.cgroup; cg != nil && !r.bornInside {
			if err := cg.Add(pid); err != nil {
				cli.Errorf(e.Stderr, "ctx agent", "%s: run cgroup: %v; ending the run", r.agent.Name, err)
				fsops.SignalProcess(pid, syscall.SIGKILL)
			}
		}
		if sandbox != nil {
			sandbox.Release()
		}
		go r.watchBudgets(stopWatch, func() { r.killRun(pid) })
		if r.broker != nil {
			r.broker.initPid.Store(int64(pid))
			r.broker.sandboxStarted()
		}
		r.closeIDMap()
		runcap.CloseChild()
		r.setStatus("ready", os.Getpid())
		go r.forwardSignals(sigs, pid)
	}

	var status int
	stdinTTY := false
	if ptyterm.IsTerminal(e.Stdin) {
		stdinTTY = true
	}
	if stdinTTY || forceTerminal {
		status = r.runOnTerminal(e, cmd, stdinTTY, started)
	} else {
		// The caller's terminal or files reach the agent only as pipes.
		cmd.Stdin, cmd.Stdout, cmd.Stderr = shieldInput(e.Stdin), shieldOutput(e.Stdout), shieldOutput(e.Stderr)
		if err := r.startFirst(cmd); err != nil {
			runcap.CloseChild()
			status = fail(e, exitUnavailable, "starting agent %s: %v", r.agent.Name, err)
		} else {
			started(cmd.Process.Pid)
			status = waitStatus(cmd.Wait())
		}
	}
	runcap.CloseChild()
	close(stopWatch)
	r.endChildren()
	r.endBudgets()
	// Every holder of the run capability is gone with the sandbox; wait
	// for the last events before recording the stop.
	select {
	case <-served:
	case <-time.After(2 * time.Second):
	}
	r.warnProtect(e)
	r.finish(status)
	return status
}

// startFirst starts the run's first process (the sandbox's init, or the
// confined program) inside the run's cgroup when it can (see
// fsops.RunCgroup.StartInside); started moves it in otherwise.
func (r *agentRun) startFirst(cmd *exec.Cmd) error {
	cg := r.budgets.cgroup
	if cg == nil {
		return cmd.Start()
	}
	inside, err := cg.StartInside(cmd.Start)
	r.bornInside = inside
	return err
}

// forwardSignals passes SIGTERM, SIGHUP and SIGINT to the sandbox's init
// (which passes them to every process of the run), then kills it after the
// grace period.
func (r *agentRun) forwardSignals(sigs <-chan os.Signal, pid int) {
	for sig := range sigs {
		fsops.SignalProcess(pid, syscall.SIGTERM)
		if r.plan == nil {
			fsops.SignalGroup(pid, sig.(syscall.Signal))
		}
		time.AfterFunc(stopGrace, func() {
			fsops.SignalProcess(pid, syscall.SIGKILL)
			fsops.SignalGroup(pid, syscall.SIGKILL)
		})
	}
}

// runOnTerminal runs the program on a PTY that ctxterm (package ptyterm)
// owns for the whole run: the caller's terminal is its console, the
// session's terminal socket lets others watch or attach, and the output is
// recorded in the session.
func (r *agentRun) runOnTerminal(e *Env, cmd *exec.Cmd, tty bool, started func(int)) int {
	id := "terminal-" + r.agent.Name + "-" + r.session
	termDir := filepath.Join(r.sess.TerminalDir, id)
	if err := fsops.MkdirNoFollow(termDir, r.sess.DirMode); err != nil {
		return fail(e, exitUnavailable, "terminal %s: %v", termDir, err)
	}
	sockets, err := fsops.TerminalDir(r.callerUID)
	if err != nil {
		return fail(e, exitUnavailable, "terminal socket directory: %v", err)
	}
	r.socket = fsops.TerminalSocketPath(sockets, r.agent.Name, r.session)
	link := filepath.Join(r.sess.TerminalDir, "main.sock")
	if err := replaceSymlink(r.socket, link); err != nil {
		return fail(e, exitUnavailable, "terminal locator %s: %v", link, err)
	}
	defer os.Remove(link)
	cfg := ptyterm.Config{
		Cmd:        cmd,
		Socket:     r.socket,
		Owner:      r.callerUID,
		Events:     filepath.Join(termDir, "events.jsonl"),
		ID:         id,
		ConsoleIn:  e.Stdin,
		ConsoleOut: e.Stdout,
		Log:        e.Stderr,
		Started:    started,
		Start:      r.startFirst,
	}
	// record_bytes: past it the recording stops and the run goes on.
	if v := r.budgets.limits.Get("record_bytes"); v != policy.Unlimited {
		cfg.RecordLimit = int64(min(v, 1<<62))
		cfg.OnRecordLimit = func() {
			r.budgetExceeded("record_bytes", "terminal recording stopped; the run goes on")
		}
	}
	if r.iso == policy.IsoUID && r.plan != nil {
		// The agent runs as its own uid: its terminal is its own.
		cfg.TTYOwner = &[2]int{int(r.agent.UID), int(r.agent.GID)}
	}
	switch {
	case r.noConsole:
		// A background session: reachable only through its socket.
		cfg.Console = ptyterm.ConsoleNone
	case tty:
		cfg.Console = ptyterm.ConsoleTTY
	default:
		cfg.Console = ptyterm.ConsolePipe
	}
	status, err := ptyterm.Serve(cfg)
	if err != nil {
		var se *ptyterm.SetupError
		if errors.As(err, &se) {
			return fail(e, exitUnavailable, "terminal: %v", err)
		}
		cli.Errorf(e.Stderr, "ctx agent", "terminal: %v", err)
	}
	return status
}

// replaceSymlink points link at target, replacing an earlier symlink
// atomically (never a file that is not a symlink).
func replaceSymlink(target, link string) error {
	if st, err := os.Lstat(link); err == nil && st.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("exists and is not a symlink")
	}
	tmp := fsops.TempName(link)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// finish records the end of the run: status dead, no pid, agent.stop, the
// session idle, and the run's runtime files gone (the session keeps
// everything durable).
func (r *agentRun) finish(status int) {
	r.setStatus("dead", 0)
	st := "ok"
	if status != 0 {
		st = "error"
	}
	r.recordEvent(fsops.Event{Type: "agent.stop", Object: "agent/" + r.agent.Name, Status: st, Exit: &status, Detail: r.protectDetail()})
	fsops.WriteVolatile(filepath.Join(r.sess.Dir, "state"), []byte("idle\n"), r.sess.FileMode)
	fsops.WriteVolatile(filepath.Join(r.sess.Dir, "updated_at"), []byte(strconv.FormatInt(time.Now().Unix(), 10)+"\n"), r.sess.FileMode)
	if r.runDir != "" {
		os.RemoveAll(r.runDir)
	}
}

// waitStatus turns cmd.Wait's result into a shell-style status.
func waitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitStatus(ee.ProcessState)
	}
	return exitInternal
}
