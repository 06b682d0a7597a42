package policy

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// A sandbox plan is plain data: the namespaces to create, the identity to
// run as, and the ordered mount operations that build the agent's new root.
// BuildPlan decides it (pure, testable without root); fsops applies it in a
// re-executed child. The operations are few and fixed, in the spirit of
// bubblewrap's setup ops: the mechanism never interprets free-form input.

// OpKind is one kind of setup operation.
type OpKind string

const (
	OpBind      OpKind = "bind"      // bind Source (host path) at Target
	OpTmpfs     OpKind = "tmpfs"     // a fresh tmpfs at Target
	OpProc      OpKind = "proc"      // a fresh procfs at Target (needs the pid namespace)
	OpDevpts    OpKind = "devpts"    // a new devpts instance at Target
	OpDir       OpKind = "dir"       // mkdir -p Target
	OpFile      OpKind = "file"      // write Data to Target (on a tmpfs the plan made)
	OpSymlink   OpKind = "symlink"   // Target is a symlink to Source
	OpMask      OpKind = "mask"      // hide Target: /dev/null over a file, an empty read-only tmpfs over a directory
	OpReadOnly  OpKind = "readonly"  // remount Target (a tmpfs the plan made) read-only
	OpProtect   OpKind = "protect"   // bind Target onto itself read-only (a part of a filesystem the plan mounted, e.g. /proc/sys)
	OpLoopback  OpKind = "loopback"  // bring the network namespace's lo up
	OpPivotRoot OpKind = "pivotroot" // make the new root / (always last of the mount ops)
)

// OpProtectPath makes Target, a file or directory inside a mount the plan
// made (the workspace), read-only in place; Target is reached without
// following any symlink (the protect control, protect.go).
const OpProtectPath OpKind = "protectpath"

// Op is one setup operation. Target is a path inside the new root.
type Op struct {
	Kind      OpKind `json:"kind"`
	Source    string `json:"source,omitempty"`
	Target    string `json:"target,omitempty"`
	ReadOnly  bool   `json:"ro,omitempty"`
	NoSuid    bool   `json:"nosuid,omitempty"`
	NoDev     bool   `json:"nodev,omitempty"`
	NoExec    bool   `json:"noexec,omitempty"`
	Recursive bool   `json:"recursive,omitempty"` // rbind
	Optional  bool   `json:"optional,omitempty"`  // skip when Source does not exist (host system dirs)
	Mode      uint32 `json:"mode,omitempty"`
	Size      string `json:"size,omitempty"` // tmpfs size= option
	Data      []byte `json:"data,omitempty"`
	Why       string `json:"why,omitempty"` // names the step in errors ("mount line 3", "workspace")
	// IDMap asks for an idmapped bind: the Plan's IDMap ids on disk are
	// shown as the agent's own (uid mode workspace), where the kernel and
	// filesystem allow it; otherwise the bind is made as is and the run says so.
	IDMap bool `json:"idmap,omitempty"`
	// Fill is what a tmpfs op writes into its new tmpfs before anything
	// is mounted over it: one op instead of one per file, link and
	// directory (/mnt holds two per tool), each entry created relative to
	// the tmpfs's own descriptor.
	Fill []FillEntry `json:"fill,omitempty"`
}

// FillEntry is one entry of a tmpfs op's Fill, by its path under the op's
// target: a directory (0755), a file holding Data (Mode, else 0444), or a
// symlink to Link. Parents come before their entries.
type FillEntry struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	Data []byte `json:"data,omitempty"`
	Link string `json:"link,omitempty"`
	Mode uint32 `json:"mode,omitempty"`
}

// The kinds of FillEntry.
const (
	FillDir  = "dir"
	FillFile = "file"
	FillLink = "link"
)

// AccessRule is one path of the second wall (Landlock in fsops): reading
// is allowed beneath Path, and writing, executing and device ioctls when
// the rule says so. Everything else is denied.
type AccessRule struct {
	Path     string `json:"path"`
	Write    bool   `json:"write,omitempty"`
	Exec     bool   `json:"exec,omitempty"`
	Dev      bool   `json:"dev,omitempty"`
	Optional bool   `json:"optional,omitempty"`
}

// IDMap is the ownership an idmapped workspace translates: files owned by
// DiskUID/DiskGID on disk appear owned by the agent, and what the agent
// creates is stored as DiskUID/DiskGID.
type IDMap struct {
	DiskUID uint32 `json:"disk_uid"`
	DiskGID uint32 `json:"disk_gid"`
}

// Namespaces to unshare.
type Namespaces struct {
	User  bool `json:"user"`
	Mount bool `json:"mount"`
	PID   bool `json:"pid"`
	UTS   bool `json:"uts"`
	IPC   bool `json:"ipc"`
	Net   bool `json:"net"`
}

// Plan is everything the sandbox child needs.
type Plan struct {
	Iso        string     `json:"iso"` // userns, uid or shared
	Namespaces Namespaces `json:"namespaces"`
	// NewRoot is the host directory the new root is mounted on (inside the
	// private mount namespace only). With RootFS it is bound as is (it holds
	// the agent's own root filesystem); otherwise a fresh tmpfs covers it.
	NewRoot string `json:"new_root"`
	RootFS  bool   `json:"rootfs"`
	Ops     []Op   `json:"ops"`
	// Identity inside the sandbox. For userns, OuterUID/OuterGID are the
	// caller's ids the namespace maps onto.
	UID      uint32   `json:"uid"`
	GID      uint32   `json:"gid"`
	Groups   []uint32 `json:"groups,omitempty"`
	OuterUID uint32   `json:"outer_uid"`
	OuterGID uint32   `json:"outer_gid"`
	Hostname string   `json:"hostname"`
	Cwd      string   `json:"cwd"`
	Env      []string `json:"env"`
	// Argv is the program to run (Argv[0] is looked up in the sandbox's
	// /usr/bin:/bin when it has no slash); Exe, when set, is the file to
	// execute with Argv as its arguments (the ctx binary running as tsh).
	Argv []string `json:"argv"`
	Exe  string   `json:"exe,omitempty"`
	// Worker is the run's ctx binary as the init finds it, which it starts
	// warm tool workers from; empty: every brokered call is executed.
	Worker string `json:"worker,omitempty"`

	// Access is the second wall applied after pivot_root (Landlock where
	// the kernel has it): the plan's read/write split and, from perm x,
	// which files may be executed. Exec false means only ExecPaths.
	Access    []AccessRule `json:"access"`
	ExecAll   bool         `json:"exec_all"`
	ExecPaths []string     `json:"exec_paths,omitempty"`
	DenyTCP   bool         `json:"deny_tcp"`
	IDMap     *IDMap       `json:"idmap,omitempty"`

	// Limits are the per-process resource limits the init sets before it
	// starts the program (every process of the run inherits them), by
	// name: cpu, data, fsize, nofile, nproc, core. A value is the soft
	// limit; cpu's hard limit is a few seconds more, so SIGXCPU comes
	// first.
	Limits map[string]uint64 `json:"limits,omitempty"`
	// NoNetwork, where no network namespace keeps the agent off the
	// network (iso landlock), has seccomp allow only AF_UNIX sockets.
	NoNetwork bool `json:"no_network,omitempty"`
}

// Validate checks the plan's own consistency: absolute clean targets
// without "..", known kinds, a pivot last. It is the mechanism's first step,
// so a corrupt plan never starts mounting.
func (p *Plan) Validate() error {
	if p.Iso == string(IsoLandlock) {
		return p.validateLandlock()
	}
	if !path.IsAbs(p.NewRoot) || path.Clean(p.NewRoot) != p.NewRoot || p.NewRoot == "/" {
		return fmt.Errorf("plan: new root %q is not an absolute clean directory", p.NewRoot)
	}
	if len(p.Argv) == 0 {
		return fmt.Errorf("plan: no program to run")
	}
	if !path.IsAbs(p.Cwd) {
		return fmt.Errorf("plan: cwd %q is not absolute", p.Cwd)
	}
	sawPivot := false
	for i, op := range p.Ops {
		switch op.Kind {
		case OpBind, OpTmpfs, OpProc, OpDevpts, OpDir, OpFile, OpSymlink, OpMask, OpReadOnly, OpProtect, OpProtectPath:
			if sawPivot && op.Kind != OpReadOnly {
				return fmt.Errorf("plan: op %d (%s) after pivot_root", i, op.Kind)
			}
			if !path.IsAbs(op.Target) || path.Clean(op.Target) != op.Target || strings.Contains(op.Target, "\x00") {
				return fmt.Errorf("plan: op %d (%s): target %q is not an absolute clean path", i, op.Kind, op.Target)
			}
		case OpLoopback:
		case OpPivotRoot:
			sawPivot = true
		default:
			return fmt.Errorf("plan: op %d: unknown kind %q", i, op.Kind)
		}
		if op.Kind == OpBind && !path.IsAbs(op.Source) {
			return fmt.Errorf("plan: op %d: bind source %q is not absolute", i, op.Source)
		}
		if len(op.Fill) > 0 && op.Kind != OpTmpfs {
			return fmt.Errorf("plan: op %d (%s): only a tmpfs is filled", i, op.Kind)
		}
		for _, e := range op.Fill {
			if !FillPathClean(e.Path) {
				return fmt.Errorf("plan: op %d (%s %s): fill path %q is not a clean relative path", i, op.Kind, op.Target, e.Path)
			}
		}
	}
	if p.Namespaces.Mount && !sawPivot {
		return fmt.Errorf("plan: a mount namespace without pivot_root")
	}
	return nil
}

// FillPathClean reports whether p is a relative path of names, none of
// them empty, "." or "..".
func FillPathClean(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." || strings.IndexByte(c, 0) >= 0 {
			return false
		}
	}
	return true
}

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
	canWrite := a.Ceiling.Has(CeilingWrite)
	canExec := a.Ceiling.Has(CeilingExec)
	var ops []Op
	add := func(op Op) { ops = append(ops, op) }
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
		if !within(tier, SandboxRoot) {
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
	add(ro(in.ProcDir, SandboxMnt+"/proc", "/mnt/proc"))
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
		add(op)
		grantWrite(SandboxWorkspace)
		for _, op := range ProtectOps(in.Protect, canWrite) {
			add(op)
		}
	}

	// The agent's mount control, then the --mount entries of this start:
	// always nosuid and nodev, read-only without perm w.
	mounts := func(list []Mount, why string) {
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
			add(op)
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

	cwd := in.Cwd
	if cwd == "" {
		cwd = SandboxWorkspace
	}
	p := &Plan{
		Iso:        in.Iso,
		Namespaces: Namespaces{User: in.Iso == "userns", Mount: true, PID: true, UTS: true, IPC: true, Net: !in.Network},
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
func WritableBind(a *Agent, op Op) Op {
	op.NoSuid, op.NoDev = true, true
	if !a.Ceiling.Has(CeilingWrite) {
		op.ReadOnly = true
	}
	if !a.Ceiling.Has(CeilingExec) {
		op.NoExec = true
	}
	return op
}
