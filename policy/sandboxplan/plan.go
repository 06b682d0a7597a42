// Package sandboxplan builds the sandbox of one run as data from policy's
// decisions: the namespaces, the identity, the ordered mount operations of
// the new root (or, in iso landlock, the Landlock rules), the environment
// and the protected paths. Like policy it is pure: it reads nothing but
// what it is handed; fsops/sandbox applies what it returns.
package sandboxplan

import (
	"fmt"
	"path"
	"strconv"

	"ctx/policy"
)

// A sandbox plan is plain data: the namespaces to create, the identity to
// run as, and the ordered mount operations that build the agent's new root.
// BuildPlan decides it (pure, testable without root); fsops applies it in a
// re-executed child. The operations are few and fixed, in the spirit of
// bubblewrap's setup ops: the mechanism never interprets free-form input.
// Sandbox paths.
const (
	SandboxWorkspace = "/workspace"
	SandboxMnt       = "/mnt"
)

// devNodes are the device files the sandbox's /dev holds.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// Kernel interfaces of the fresh /proc that an agent must not read
// (procMasked: kernel memory, keys, timers and scheduler internals that
// leak host state) or change (procReadOnly: sysctls, the sysrq trigger,
// interrupt and bus settings). Docker's default masks are the reference.
var (
	procMasked = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/sched_debug", "/proc/scsi", "/proc/timer_list", "/proc/timer_stats"}
	procReadOnly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// ProcMasked and ProcReadOnly are reported by the manual's test.
func ProcMasked() []string   { return append([]string(nil), procMasked...) }
func ProcReadOnly() []string { return append([]string(nil), procReadOnly...) }

// BuildPlan computes the sandbox of one run. The order of operations is
// the order of mounting: later mounts cover earlier ones.
//
// The agent's perm shapes the sandbox, not only its tools: without w every
// bind the agent could write through (workspace, home, mounts, shared
// spaces) is read-only; without x the writable places are noexec and the
// second wall lets it execute only ctx and its tools.
//
// long: the plan is a sequence of mounts whose order is its meaning (a
// later mount covers an earlier one); its commented sections share the
// add, ro and grantWrite helpers, so it reads top to bottom as the sandbox
// is built (ctx man sandbox, MODES).
func BuildPlan(in PlanInput) (*Plan, error) {
	a := in.Agent
	if in.Iso != "userns" && in.Iso != "uid" {
		return nil, fmt.Errorf("sandbox: isolation %q builds no sandbox", in.Iso)
	}
	canWrite := a.Ceiling.Has(policy.CeilingWrite)
	canExec := a.Ceiling.Has(policy.CeilingExec)
	var ops []Op
	add := func(op Op) { ops = append(ops, op) }
	perRun := map[int]bool{} // ops made from this run's own inputs
	addRun := func(op Op) { perRun[len(ops)] = true; add(op) }
	ro := func(src, dst, why string) Op {
		return Op{Kind: OpBind, Source: src, Target: dst, ReadOnly: true, NoSuid: true, NoDev: true, Why: why}
	}
	writable := func(op Op) Op { return WritableBind(a, op) }
	access := []AccessRule{{Path: "/", Exec: canExec}}
	grantWrite := func(target string) {
		if canWrite {
			access = append(access, AccessRule{Path: target, Write: true, Exec: canExec})
		}
	}

	// The host's system directories, read-only; /etc is synthesized.
	if !in.RootFS {
		for _, d := range in.SystemDirs {
			if d.Path == "/etc" {
				continue
			}
			if d.Symlink != "" {
				add(Op{Kind: OpSymlink, Source: d.Symlink, Target: d.Path, Why: "system directory"})
				continue
			}
			op := ro(d.Path, d.Path, "system directory")
			op.Recursive, op.Optional = true, true
			add(op)
		}
		// The synthesized /etc has no shell startup files, shadow or keys
		// of the host's.
		etcOps(a, in, add)
	}

	// A minimal /dev, a fresh /proc with the kernel's knobs read-only and
	// its sensitive files masked, a private /tmp.
	devFill := []FillEntry{{Path: "pts", Kind: FillDir}, {Path: "ptmx", Kind: FillLink, Link: "pts/ptmx"},
		{Path: "fd", Kind: FillLink, Link: "/proc/self/fd"}}
	for i, n := range []string{"stdin", "stdout", "stderr"} {
		devFill = append(devFill, FillEntry{Path: n, Kind: FillLink, Link: "/proc/self/fd/" + strconv.Itoa(i)})
	}
	add(Op{Kind: OpTmpfs, Target: "/dev", Mode: 0o755, Size: "1m", Why: "/dev", Fill: devFill})
	for _, n := range devNodes {
		add(Op{Kind: OpBind, Source: "/dev/" + n, Target: "/dev/" + n, NoSuid: true, NoExec: true, Why: "/dev"})
	}
	add(Op{Kind: OpDevpts, Target: "/dev/pts", Why: "/dev/pts"})
	add(Op{Kind: OpTmpfs, Target: "/dev/shm", Mode: 0o1777, Size: "64m", NoExec: !canExec})
	add(Op{Kind: OpReadOnly, Target: "/dev"})
	access = append(access, AccessRule{Path: "/dev", Write: true, Dev: true})
	add(Op{Kind: OpProc, Target: "/proc", Why: "/proc"})
	for _, p := range procMasked {
		add(Op{Kind: OpMask, Target: p, Why: "masking " + p})
	}
	for _, p := range procReadOnly {
		add(Op{Kind: OpProtect, Target: p, Why: "/proc read-only"})
	}
	add(Op{Kind: OpTmpfs, Target: "/tmp", Mode: 0o1777, Size: tmpfsSize(in.Budgets), NoExec: !canExec, Why: "/tmp"})
	access = append(access, AccessRule{Path: "/tmp", Write: true, Exec: canExec})

	// /ctx: a read-only skeleton holding the binary, the agent's own
	// object, the manual, the shared spaces it was granted, and tool tiers
	// holding only the tools it may execute.
	root := func(rel string) string { return path.Join(in.RootDir, rel) }
	add(Op{Kind: OpTmpfs, Target: SandboxRoot, Mode: 0o755, Size: "1m", Why: "/ctx"})
	add(ro(root("bin"), SandboxRoot+"/bin", "/ctx/bin"))
	add(ro(root("agent/"+a.Name), SandboxRoot+"/agent/"+a.Name, "/ctx/agent"))
	add(ro(root("agent/"+a.Name+".d"), SandboxRoot+"/agent/"+a.Name+".d", "/ctx/agent"))
	add(ro(root("shared/cortexfs-docs"), SandboxRoot+"/shared/cortexfs-docs", "/ctx/shared/cortexfs-docs"))
	for _, s := range in.Shared {
		target := SandboxRoot + "/shared/" + s.Space
		if s.Write {
			add(writable(Op{Kind: OpBind, Source: s.HostDir, Target: target, Why: "shared space " + s.Space}))
			grantWrite(target)
		} else {
			add(ro(s.HostDir, target, "shared space "+s.Space))
		}
	}
	execPaths := []string{SandboxRoot + "/bin", SandboxMnt + "/tools", SandboxMnt + "/mcp"}
	for _, tier := range a.Path {
		if !policy.Within(tier, SandboxRoot) {
			continue // a tier outside /ctx is served by the mount file, if at all
		}
		execPaths = append(execPaths, tier)
		// An empty tmpfs covers the tier (a shared space's tool/ directory
		// included), then each allowed tool is bound into it.
		add(Op{Kind: OpTmpfs, Target: tier, Mode: 0o755, Size: "1m", Why: "tool tier " + tier})
		for _, t := range in.Tools {
			if t.Tier != tier {
				continue
			}
			add(ro(t.HostPath, tier+"/"+t.Name, "tool "+t.Name))
			add(ro(t.HostDotD, tier+"/"+t.Name+".d", "tool "+t.Name))
		}
		add(Op{Kind: OpReadOnly, Target: tier})
	}
	add(Op{Kind: OpReadOnly, Target: SandboxRoot})

	// agentrc's /mnt: tools with their toolspec, skills, MCP tools by
	// server, the SOP, and the run's live state, all read-only: a tmpfs
	// filled in one op, then the binds that need the host's files.
	var mnt []FillEntry
	fill := func(e FillEntry) { mnt = append(mnt, e) }
	fill(FillEntry{Path: "tools", Kind: FillDir})
	fill(FillEntry{Path: "mcp", Kind: FillDir})
	fill(FillEntry{Path: "skills", Kind: FillDir})
	fill(FillEntry{Path: "SOP", Kind: FillFile, Data: in.SOP})
	var mntBinds []Op
	mcpSeen := map[string]bool{}
	for _, t := range in.Tools {
		// Every /mnt/tools entry is a link to ctx, which asks the run
		// host to run the tool of that name (ctx man sandbox, BROKER): a
		// third-party tool too runs only on the host's decision, from its
		// tier, and costs no mount here.
		fill(FillEntry{Path: "tools/" + t.Name, Kind: FillLink, Link: SandboxRoot + "/bin/ctx"})
		fill(FillEntry{Path: "tools/" + t.Name + ".toolspec.json", Kind: FillFile, Data: t.Schema})
		// /mnt/mcp/S/T is the same executable; run by that path it finds
		// its tool through CTX_PATH (applets/agentrc.go). The first tool
		// of a server and MCP name wins, as CTX_PATH lookup would.
		if t.MCPServer == "" {
			continue
		}
		if rel := "mcp/" + t.MCPServer + "/" + t.MCPTool; !mcpSeen[rel] {
			if !mcpSeen["mcp/"+t.MCPServer] {
				mcpSeen["mcp/"+t.MCPServer] = true
				fill(FillEntry{Path: "mcp/" + t.MCPServer, Kind: FillDir})
			}
			mcpSeen[rel] = true
			fill(FillEntry{Path: rel + ".toolspec.json", Kind: FillFile, Data: t.Schema})
			mntBinds = append(mntBinds, ro(t.HostPath, SandboxMnt+"/"+rel, "/mnt/mcp"))
		}
	}
	add(Op{Kind: OpTmpfs, Target: SandboxMnt, Mode: 0o755, Size: "16m", Why: "/mnt", Fill: mnt})
	for _, op := range mntBinds {
		add(op)
	}
	for _, s := range in.Skills {
		add(ro(s.HostDir, SandboxMnt+"/skills/"+s.Name, "/mnt/skills"))
	}
	addRun(ro(in.ProcDir, SandboxMnt+"/proc", "/mnt/proc"))
	add(Op{Kind: OpReadOnly, Target: SandboxMnt})

	// The agent's home, whose session history it may read but not rewrite:
	// the run host owns the audit trail.
	add(writable(Op{Kind: OpBind, Source: in.AgentHome, Target: SandboxHome, Why: "the agent's home"}))
	grantWrite(SandboxHome)
	add(ro(path.Join(in.AgentHome, "session"), SandboxHome+"/session", "the agent's sessions"))
	// Its skills are its instructions: read-only here as at /mnt/skills,
	// or it would rewrite them for its next run.
	if in.SkillsDir != "" {
		add(ro(in.SkillsDir, SandboxHome+"/skills", "the agent's skills"))
	}

	// The caller's working directory, read-write when perm has w.
	if in.Workspace != "" {
		op := writable(Op{Kind: OpBind, Source: in.Workspace, Target: SandboxWorkspace, Why: "workspace"})
		op.IDMap = in.WorkspaceIDMap != nil
		addRun(op)
		grantWrite(SandboxWorkspace)
		for _, op := range ProtectOps(in.Protect, canWrite) {
			addRun(op)
		}
	}

	// The agent's mount control, then the --mount entries of this start:
	// always nosuid and nodev, read-only without perm w.
	mounts := func(list []policy.Mount, why string) {
		for i, m := range list {
			op := mountOp(m, in.RootDir, fmt.Sprintf("%s %d", why, i+1))
			if op.ReadOnly {
				op.NoSuid, op.NoDev = true, true
				if !canExec {
					op.NoExec = true
				}
			} else {
				op = writable(op)
			}
			addRun(op)
			if !op.ReadOnly {
				access = append(access, AccessRule{Path: op.Target, Write: true, Exec: canExec && !op.NoExec})
			}
		}
	}
	mounts(a.Mounts, "mount line")
	mounts(in.Extra, "--mount")

	if !in.Network {
		add(Op{Kind: OpLoopback})
	}
	add(Op{Kind: OpPivotRoot})
	if !in.RootFS || !canWrite {
		// The agent's own root filesystem is its to write, with perm w.
		add(Op{Kind: OpReadOnly, Target: "/"})
	} else {
		grantWrite("/")
	}

	if in.Template && !in.RootFS {
		markTemplate(ops, perRun)
	}
	cwd := in.Cwd
	if cwd == "" {
		cwd = SandboxWorkspace
	}
	p := &Plan{
		Iso:        in.Iso,
		Namespaces: SandboxNamespaces(in.Iso, in.Network),
		NewRoot:    in.NewRoot,
		RootFS:     in.RootFS,
		Ops:        ops,
		UID:        a.UID,
		GID:        a.GID,
		Groups:     a.Groups,
		OuterUID:   in.CallerUID,
		OuterGID:   in.CallerGID,
		Hostname:   hostname(a),
		Cwd:        cwd,
		Env:        in.Env,
		Argv:       in.Argv,
		Exe:        in.Exe,
		Access:     access,
		ExecAll:    canExec,
		// The network namespace is the wall here; denying TCP on top
		// would break servers on the sandbox's own loopback.
		DenyTCP: false,
		IDMap:   in.WorkspaceIDMap,
		Limits:  processLimits(in.Budgets, in.Cgroup),
		// A network namespace confines inet sockets, not every family:
		// AF_VSOCK reaches the hypervisor from any namespace. Without the
		// grant the filter makes unix sockets only, as in the other modes.
		NoNetwork: !in.Network,
	}
	if in.Egress != nil && !in.Network {
		// The namespace holds only loopback, where the init listens for
		// the run host's proxy: inet sockets reach nothing else, and the
		// filter lets the program make them (still no AF_VSOCK).
		p.Egress, p.NoNetwork = in.Egress, false
	}
	if !canExec {
		p.ExecPaths = execPaths
	}
	if in.Iso == "userns" {
		// Only the caller's ids exist in the namespace; supplementary
		// groups cannot be mapped.
		p.Groups = nil
	}
	return p, p.Validate()
}

// WritableBind gives a bind the agent may write through (workspace, home,
// a writable mount or shared space) what the agent's perm allows: always
// nosuid and nodev, read-only without w, noexec without x.
func WritableBind(a *policy.Agent, op Op) Op {
	op.NoSuid, op.NoDev = true, true
	if !a.Ceiling.Has(policy.CeilingWrite) {
		op.ReadOnly = true
	}
	if !a.Ceiling.Has(policy.CeilingExec) {
		op.NoExec = true
	}
	return op
}

// SandboxNamespaces are the namespaces a sandbox of iso mode iso (userns
// or uid) is born in: all but the network's when the network is granted,
// and a user namespace in userns mode.
func SandboxNamespaces(iso string, network bool) Namespaces {
	return Namespaces{User: iso == string(policy.IsoUserns), Mount: true, PID: true, UTS: true, IPC: true, Net: !network}
}
