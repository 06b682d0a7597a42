package runhost

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/applets/toolchain"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/sandbox"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// Preparing a run (ctx agent start, before anything starts): who may
// start it and in which isolation mode, its session and workspace, the
// tools, grants and skills it gets, the run directory and broker, and the
// sandbox plan. Nothing of the run starts here; a step that fails has
// printed one line and returns the exit status.

// prepare resolves everything the run needs and builds the plan. On
// failure it has printed one line and returns the exit status.
func (r *AgentRun) prepare(e *cli.Env, session, sharedSpace, cwd string, mountArgs [][]string, command []string) (int, bool) {
	a := r.Agent
	if code, ok := r.checkStart(e); !ok {
		return code, false
	}
	// Secrets first: a run that cannot have them does not start.
	secrets, code, ok := lifecycle.LoadSecrets(e, r.Root, a)
	if !ok {
		return code, false
	}
	place, code, ok := r.resolveSession(e, session, sharedSpace)
	if !ok {
		return code, false
	}
	extra, code, ok := r.resolveWorkspace(e, cwd, mountArgs)
	if !ok {
		return code, false
	}
	if code, ok := r.resolveRuntime(e); !ok {
		return code, false
	}
	// Two parts of the preparation that depend on nothing else run beside
	// the rest, on another core: reading the tools the agent may run (the
	// trust rule examines each one's control tree) and, in uid mode, the
	// idmapped workspace (a process started and killed for its user
	// namespace). Each was a large part of the run host's work before the
	// sandbox starts. Both are waited for before prepare returns.
	var tools []sandboxplan.ProjectedTool
	var policyLines []string
	toolsRead := make(chan struct{})
	go func() {
		defer close(toolsRead)
		tools, policyLines = projectTools(r.agents, a)
		toolrun.WithToolSpecs(tools)
	}()
	defer func() { <-toolsRead }()
	var idmap *sandboxplan.IDMap
	idmapWhy := ""
	idmapMade := make(chan struct{})
	go func() {
		defer close(idmapMade)
		if r.iso == policy.IsoUID {
			op := sandboxplan.WritableBind(a, sandboxplan.Op{Kind: sandboxplan.OpBind})
			idmap, r.idmapTree, idmapWhy = r.workspaceIDMap(op)
		}
	}()
	defer func() { <-idmapMade }()
	budgetsMade := r.startCgroupAndInit(e)
	defer func() { <-budgetsMade }()
	var err error
	r.Sess, err = r.Root.EnsureSessionAt(place, a.Name, r.Session, sandboxplan.SandboxWorkspace, r.workspace)
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "session %s: %v", r.Session, err), false
	}
	// The program's environment first: the protected paths add to it.
	exe := r.programEnv(e, command, secrets)
	g, grantLines, protectLines, code, ok := r.prepareBesideTools(e)
	if !ok {
		return code, false
	}

	<-toolsRead
	if grantLines, code, ok = r.prepareWithBudgets(e, budgetsMade, g.network, grantLines); !ok {
		return code, false
	}
	r.tools = tools
	policyLines = append(policyLines, grantLines...)
	policyLines = append(policyLines, protectLines...)
	r.collectExecutables()
	if r.iso == policy.IsoShared {
		return r.prepareShared(e, exe)
	}

	<-idmapMade
	if code, ok := r.prepareRunDir(e, policyLines, idmapWhy); !ok {
		return code, false
	}
	return r.preparePlan(e, exe, extra, tools, idmap, g)
}

// prepareWithBudgets is what the run's limits decide, once they are
// known (budgetsMade): the disk budget's look at the start, and the
// egress proxy (net_bytes, net_connections), whose /mnt/proc/policy lines
// it adds to lines.
func (r *AgentRun) prepareWithBudgets(e *cli.Env, budgetsMade <-chan struct{}, network bool, lines []string) ([]string, int, bool) {
	<-budgetsMade
	if code, ok := r.checkDiskAtStart(e); !ok {
		return nil, code, false
	}
	netLines, err := r.prepareNetwork(network)
	if err != nil {
		return nil, cli.Fail(e, cli.Unavailable, "agent %s: network: %v", r.Agent.Name, err), false
	}
	return append(lines, netLines...), 0, true
}

// preparePlan builds the sandbox's plan for the run's mode, and checks it
// keeps the run's secret out of the agent's reach.
func (r *AgentRun) preparePlan(e *cli.Env, exe string, extra []policy.Mount, tools []sandboxplan.ProjectedTool, idmap *sandboxplan.IDMap, g runGrants) (int, bool) {
	home := r.Root.AgentHome(int(r.Agent.UID), r.Agent.Name)
	env := r.env
	build := func(extra []policy.Mount) (int, bool) {
		r.env = env
		if r.iso == policy.IsoLandlock {
			return r.prepareLandlock(e, exe, home, extra, tools, g.shared, g.network)
		}
		return r.prepareNamespaces(e, exe, home, extra, idmap, g)
	}
	if code, ok := build(extra); !ok {
		return code, false
	}
	// The rest of the chain of a program whose own directory the person
	// mounted, shown read-only by the run host (chainMounts).
	if more := r.chainMounts(e, exe, extra); len(more) > 0 {
		if code, ok := build(append(append([]policy.Mount(nil), extra...), more...)); !ok {
			return code, false
		}
		for _, m := range more {
			r.chainShown = append(r.chainShown, m.Source)
		}
	}
	if code, ok := r.checkProgramShown(e, exe); !ok {
		return code, false
	}
	return r.checkSecretHidden(e)
}

// checkStart refuses a start the caller may not make or this host cannot
// host, before anything is written or logged, and chooses the run's
// isolation mode.
func (r *AgentRun) checkStart(e *cli.Env) (int, bool) {
	a := r.Agent
	if r.callerUID != 0 && uint32(r.callerUID) != a.Owner {
		return cli.Fail(e, cli.Denied, "agent %s belongs to uid %d; only its owner or root may start it", a.Name, a.Owner), false
	}
	// Never an agent another uid defined, whatever its owner control
	// says (DESIGN §16 rule 12): every control the start reads must be
	// root's, the tree owner's or the caller's, and writable by no one
	// else. Refused before anything is written or logged.
	if err := r.Root.CheckAgentDef(a.Name, uint32(r.callerUID)); err != nil {
		return cli.Fail(e, cli.Denied, "%v", err), false
	}
	// A run needs /proc: its init finds the run's processes there to end
	// them, and the broker checks who calls it. Refused before anything
	// is written, as ctx doctor says.
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return cli.Fail(e, cli.Unavailable, "agent %s: /proc is not mounted, and a run needs it (its init ends the run's processes and its broker checks its callers there); mount -t proc proc /proc", a.Name), false
	}
	if a.RunsAsHostRoot(uint32(r.callerUID)) && !r.allowHostRoot {
		why := "its uid is 0"
		if a.Isolation(uint32(r.callerUID)) == policy.IsoShared {
			why = "iso shared runs it as the caller, root"
		}
		return cli.Fail(e, cli.Denied, "agent %s would run as host root (%s); give it an unprivileged uid (ctx set%s agent/%s.d/uid N) or start it with --allow-host-root", a.Name, why, r.Root.Option(), a.Name), false
	}
	// The mode this run gets: the agent's iso control, auto without one
	// (the strongest this host allows: userns or uid, then landlock; never
	// shared unless asked for by name). A mode that cannot work here is
	// refused with the reason and what would work, before anything is
	// written or logged.
	req := a.Isolation(uint32(r.callerUID))
	probe := r.probe
	if probe == nil {
		probe = sandbox.ProbeIsolation
	}
	iso, err := policy.ChooseIso(req, uint32(r.callerUID), probe(req == policy.IsoAuto))
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "agent %s: %v", a.Name, err), false
	}
	r.iso, r.isoAsked = iso, req
	canonical, err := canonicalDir(r.Root.Dir)
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "root %s: %v", r.Root.Dir, err), false
	}
	r.Root.Dir = canonical
	return 0, true
}

// resolveSession finds where the run's session lives (with the agent's
// own, or in a shared space) and its name: --session, else the place's
// current one, else "default".
func (r *AgentRun) resolveSession(e *cli.Env, session, sharedSpace string) (fsops.SessionPlace, int, bool) {
	place, code, ok := lifecycle.StartSessionPlace(e, r.Root, r.Agent, sharedSpace)
	if !ok {
		return place, code, false
	}
	if session == "" {
		session = place.Current()
	}
	if session == "" {
		session = "default"
	}
	if err := policy.ValidName(session); err != nil {
		return place, cli.UsageError(e, "--session: %v", err), false
	}
	r.Session = session
	return place, 0, true
}

// resolveWorkspace settles the workspace (--cwd, else the current
// directory, canonical) and parses the --mount arguments.
func (r *AgentRun) resolveWorkspace(e *cli.Env, cwd string, mountArgs [][]string) ([]policy.Mount, int, bool) {
	a := r.Agent
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, cli.Fail(e, cli.Unavailable, "current directory: %v", err), false
		}
		cwd = wd
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() || !filepath.IsAbs(cwd) {
		return nil, cli.UsageError(e, "--cwd %s: not an existing absolute directory", cwd), false
	}
	cwd, err := canonicalDir(cwd)
	if err != nil {
		return nil, cli.Fail(e, cli.Unavailable, "workspace: %v", err), false
	}
	r.workspace = cwd
	// The workspace is the agent's to write: it must not hold the ctx
	// tree (the agent would rewrite its own controls, policy and tools)
	// nor lie inside it (it would write into the tree).
	if within(r.Root.Dir, cwd) || within(cwd, r.Root.Dir) {
		return nil, cli.Fail(e, cli.Unavailable, "agent %s: the workspace %s and the ctx tree %s overlap: the agent could rewrite its own controls; start it from a directory outside the tree (or use --cwd)", a.Name, cwd, r.Root.Dir), false
	}
	var extra []policy.Mount
	for i, m := range mountArgs {
		mm, err := policy.ParseMounts([]byte(strings.Join(m, "\t") + "\t-\n"))
		if err != nil {
			return nil, cli.UsageError(e, "--mount %d: %v", i+1, err), false
		}
		extra = append(extra, mm...)
	}
	return extra, 0, true
}

// resolveRuntime finds the caller's runtime directory, makes sure the
// agent's home exists, and names the run.
func (r *AgentRun) resolveRuntime(e *cli.Env) (int, bool) {
	a := r.Agent
	var err error
	// Keyed by the tree: another tree's runs of the same agent and
	// session never meet this one's (ctx man ctx.session).
	if r.treeKey, err = r.Root.RuntimeKey(); err != nil {
		return cli.Fail(e, cli.Unavailable, "ctx tree: %v", err), false
	}
	if r.runtime, err = fsops.TreeRuntimeDir(r.callerUID, r.treeKey); err != nil {
		return cli.Fail(e, cli.Unavailable, "runtime directory: %v", err), false
	}
	if r.runtime, err = canonicalDir(r.runtime); err != nil {
		return cli.Fail(e, cli.Unavailable, "runtime directory: %v", err), false
	}
	// The agent's home exists whatever its uid was set to since bootstrap;
	// in uid mode the agent owns the parts of it that it writes.
	if _, err := r.Root.EnsureAgentHome(int(a.UID), int(a.GID), a.Name, r.callerUID == 0 && a.UID != 0); err != nil {
		var fe *fsops.ForeignError
		if errors.As(err, &fe) {
			return cli.Fail(e, cli.Denied, "%v", err), false
		}
		return cli.Fail(e, cli.Unavailable, "agent %s home: %v", a.Name, err), false
	}
	r.RunID = fsops.NewRunID()
	return 0, true
}

// runGrants are what the agent is granted beside its tools: shared
// spaces, the network, and (but in iso shared) its skills.
type runGrants struct {
	shared  []sandboxplan.SharedGrant
	network bool
	skills  lifecycle.RunSkills
}

// gatherGrants reads the agent's grants and returns them with their
// /mnt/proc/policy lines.
func (r *AgentRun) gatherGrants(e *cli.Env) (runGrants, []string, int, bool) {
	a := r.Agent
	var g runGrants
	var lines []string
	g.shared, lines = sharedGrants(r.Root, a)
	g.network = networkGranted(a)
	if r.iso != policy.IsoShared {
		skills, skillLines, err := lifecycle.GatherSkills(r.Root, a, g.shared)
		if err != nil {
			return g, nil, cli.Fail(e, cli.Unavailable, "agent %s: %v", a.Name, err), false
		}
		g.skills = skills
		lines = append(lines, skillLines...)
	}
	// network:default granted or not, then each named grant: what the
	// run may reach (a run with egress keeps them current).
	lines = append(lines, a.NetworkGrants().ProcLines()...)
	return g, lines, 0, true
}

// programEnv sets the program's environment and argv (the command, else
// the tool shell), and returns the file to execute for the tool shell
// ("" for a command, which is looked up). The agent's secrets are in the
// environment and nowhere else; a plan only printed shows VAR=<secret>.
func (r *AgentRun) programEnv(e *cli.Env, command []string, secrets []policy.EnvVar) (exe string) {
	r.env = sandboxplan.SandboxEnv(r.Agent, sandboxplan.RunSettings{Session: r.Session, Run: r.RunID,
		Term: e.Getenv("TERM"), Lang: e.Getenv("LANG")})
	r.env = append(r.env, "CTX_RUN_FD="+strconv.Itoa(sandbox.RunFD))
	r.env = policy.WithSecrets(r.env, secrets, r.planOnly)
	r.argv = command
	if len(r.argv) == 0 {
		r.argv, exe = []string{"tsh"}, sandboxplan.SandboxRoot+"/bin/ctx"
	}
	return exe
}

// prepareBesideTools is what the preparation does while the tools are
// read on another core, which does not depend on them: the grants, and
// (but in iso shared, which has neither) the protected paths and the run
// directory with its first files. It returns the grants with their lines
// and the protected paths' lines.
func (r *AgentRun) prepareBesideTools(e *cli.Env) (runGrants, []string, []string, int, bool) {
	g, grantLines, code, ok := r.gatherGrants(e)
	if !ok || r.iso == policy.IsoShared {
		return g, grantLines, nil, code, ok
	}
	protectLines, err := r.gatherProtect()
	if err != nil {
		return g, nil, nil, cli.Fail(e, cli.Unavailable, "agent %s: %v", r.Agent.Name, err), false
	}
	if err := r.makeRunDir(); err != nil {
		return g, nil, nil, cli.Fail(e, cli.Unavailable, "run directory: %v", err), false
	}
	return g, grantLines, protectLines, 0, true
}

// prepareRunDir completes the run's policy lines (the walls), writes the
// rest of the run directory, and starts the broker.
func (r *AgentRun) prepareRunDir(e *cli.Env, policyLines []string, idmapWhy string) (int, bool) {
	policyLines = append(policyLines, r.wallLines(idmapWhy)...)
	if w := r.workspaceWriteLine(e, idmapWhy); w != "" {
		policyLines = append(policyLines, w)
	}
	if err := r.writeRunDir(policyLines); err != nil {
		return cli.Fail(e, cli.Unavailable, "run directory: %v", err), false
	}
	var static []string
	for _, l := range policyLines {
		if r.net != nil && strings.HasPrefix(l, "network:") {
			continue // written as the policy is now (writePolicy)
		}
		if !strings.HasPrefix(l, "tool:") && !strings.HasPrefix(l, "tool ") && !strings.HasPrefix(l, "tier ") {
			static = append(static, l)
		}
	}
	if !r.planOnly {
		if err := r.startBroker(static); err != nil {
			// Tools then run in the calling process, as before the broker.
			line := "sandbox broker unavailable: " + err.Error() + "\n"
			if r.iso == policy.IsoLandlock {
				line += "sandbox unix sockets NOT closed: without a broker there is no unix gate; the run connects to every unix socket its uid may\n"
			}
			fsops.AppendLine(filepath.Join(r.runDir, "policy"), []byte(line))
		} else {
			// Every call is the broker's to record: no run capability.
			r.env = withoutVar(r.env, "CTX_RUN_FD")
		}
	}
	return 0, true
}

// prepareNamespaces builds the plan of a sandbox with namespaces (iso
// userns, uid): a new root (the agent's own root filesystem, or a fresh
// tmpfs) with what the agent is given mounted into it.
func (r *AgentRun) prepareNamespaces(e *cli.Env, exe, home string, extra []policy.Mount, idmap *sandboxplan.IDMap, g runGrants) (int, bool) {
	a := r.Agent
	newRoot := filepath.Join(home, "root")
	if a.Root != "" {
		newRoot = authority.Reroot(r.Root, a.Root)
	}
	if err := fsops.MkdirNoFollow(newRoot, 0o700); err != nil {
		return cli.Fail(e, cli.Unavailable, "agent root %s: %v", newRoot, err), false
	}
	in := sandboxplan.PlanInput{
		Agent: a, Iso: string(r.iso), CallerUID: uint32(r.callerUID), CallerGID: uint32(r.callerGID),
		RootDir: r.Root.Dir, NewRoot: newRoot, RootFS: toolchain.HasRootFS(newRoot), Template: r.iso == policy.IsoUID && r.callerUID == 0, SystemDirs: toolchain.SystemDirs(), Etc: hostEtc(),
		Workspace: r.workspace, WorkspaceIDMap: idmap, AgentHome: home, Extra: extra, Tools: r.tools, Shared: g.shared,
		ProcDir: r.runDir, SkillsDir: g.skills.Dir, Skills: g.skills.List, SOP: r.sop, Network: g.network, Egress: r.net.PlanEgress(),
		Budgets: r.planBudgets(), Cgroup: r.budgets.cgroup != nil,
		Cwd: a.Cwd, Env: r.env, Argv: r.argv, Exe: exe,
	}
	in.Protect = &r.protect.wp
	var err error
	if r.plan, err = sandboxplan.BuildPlan(in); err != nil {
		return cli.Fail(e, cli.Unavailable, "%v", err), false
	}
	r.plan.Worker = r.workerPath(sandboxplan.SandboxRoot + "/bin/ctx")
	return 0, true
}
