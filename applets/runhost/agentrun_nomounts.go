package runhost

import (
	"os"
	"path/filepath"
	"strings"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/toolchain"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// The two modes without mounts, iso shared and iso landlock: the program
// sees the host's own paths, so its environment names them, and what a
// sandbox would have mounted is a Landlock rule (iso landlock) or nothing
// (iso shared).

// prepareShared is iso=shared: no namespaces at all. The program runs as
// the caller, in the workspace, and knows it is an agent only from
// CTX_AGENT, CTX_SESSION and CTX_RUN_ID, which any process of the same uid
// could set too.
func (r *AgentRun) prepareShared(e *cli.Env, exe string) (int, bool) {
	home := r.Root.AgentHome(int(r.Agent.UID), r.Agent.Name)
	r.env = r.hostPathEnv(home)
	// Protected paths: Landlock write rules from /, applied by ctx-confine.
	protectLines, err := r.gatherProtect()
	if err == nil {
		err = r.protectShared(protectLines)
	}
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "agent %s: %v", r.Agent.Name, err), false
	}
	if exe != "" {
		self, err := fsops.Executable()
		if err != nil {
			return cli.Fail(e, cli.Internal, "%v", err), false
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
func (r *AgentRun) hostPathEnv(home string) []string {
	var env []string
	for _, kv := range r.env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CTX_ROOT":
			kv = "CTX_ROOT=" + r.Root.Dir
		case "CTX_HOME":
			kv = "CTX_HOME=" + r.Root.Home(int(r.Agent.UID))
		case "CTX_PATH":
			kv = "CTX_PATH=" + strings.Join(authority.ToolDirs(r.Root, r.Agent), ":")
		case "HOME":
			kv = "HOME=" + home
		case "PATH":
			kv = "PATH=" + toolchain.SharedPATH(r.Root, strings.TrimPrefix(kv, "PATH="))
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
func (r *AgentRun) prepareLandlock(e *cli.Env, exe, home string, extra []policy.Mount, tools []sandboxplan.ProjectedTool,
	shared []sandboxplan.SharedGrant, network bool) (int, bool) {
	a := r.Agent
	tmp := filepath.Join(home, "tmp")
	if err := fsops.MkdirNoFollow(tmp, 0o700); err != nil {
		return cli.Fail(e, cli.Unavailable, "agent %s: %s: %v", a.Name, tmp, err), false
	}
	if r.callerUID == 0 && a.UID != 0 {
		os.Lchown(tmp, int(a.UID), int(a.GID))
	}
	r.env = append(r.hostPathEnv(home), "CTX_RUN_DIR="+r.runDir,
		"CTX_BROKER="+filepath.Join(r.runDir, broker.SocketName), "TMPDIR="+tmp)
	if exe != "" {
		exe = r.Root.Path("bin", "ctx")
	}
	in := sandboxplan.PlanInput{
		Agent: a, Iso: string(r.iso), CallerUID: uint32(r.callerUID), CallerGID: uint32(r.callerGID),
		RootDir: r.Root.Dir, SystemDirs: toolchain.SystemDirs(), Workspace: r.workspace, AgentHome: home, Extra: extra,
		Tools: tools, Shared: shared, ProcDir: r.runDir, Network: network, Egress: r.net.PlanEgress(),
		Budgets: r.planBudgets(), Cgroup: r.budgets.cgroup != nil, HostTiers: authority.ToolDirs(r.Root, a),
		Cwd: a.Cwd, Env: r.env, Argv: r.argv, Exe: exe, Protect: &r.protect.wp, HomeTop: r.homeTop,
	}
	var err error
	if r.plan, err = sandboxplan.BuildLandlockPlan(in); err != nil {
		return cli.Fail(e, cli.Unavailable, "%v", err), false
	}
	if err := r.protectLandlockPlan(); err != nil {
		return cli.Fail(e, cli.Unavailable, "agent %s: %v", a.Name, err), false
	}
	r.plan.Worker = r.workerPath(r.Root.Path("bin", "ctx"))
	// Where Landlock cannot keep the host's unix sockets closed, the
	// init hands the run's connects to this host (fsops/sandbox/unixgate.go),
	// which has the broker to let them reach.
	r.plan.UnixGate = r.broker != nil
	return 0, true
}
