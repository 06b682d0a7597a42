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
	OpLoopback  OpKind = "loopback"  // bring the network namespace's lo up
	OpPivotRoot OpKind = "pivotroot" // make the new root / (always last of the mount ops)
)

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
}

// Validate checks the plan's own consistency: absolute clean targets
// without "..", known kinds, a pivot last. It is the mechanism's first step,
// so a corrupt plan never starts mounting.
func (p *Plan) Validate() error {
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
		case OpBind, OpTmpfs, OpProc, OpDevpts, OpDir, OpFile, OpSymlink, OpMask, OpReadOnly:
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
	}
	if p.Namespaces.Mount && !sawPivot {
		return fmt.Errorf("plan: a mount namespace without pivot_root")
	}
	return nil
}

// HostDir is a host system directory as the plan found it: a real
// directory to bind read-only, or a symlink (merged /usr) to recreate.
type HostDir struct {
	Path    string
	Symlink string // the link's target when Path is a symlink
}

// ProjectedTool is a tool the agent may execute, as the host found it.
type ProjectedTool struct {
	Name       string
	Tier       string // the CTX_PATH directory inside the sandbox (/ctx/tool)
	HostPath   string // the executable on the host
	HostDotD   string // its control directory on the host
	Schema     []byte // input schema, for /mnt/tools/NAME.toolspec.json
	MCPServer  string // the MCP server of a projected tool, else ""
	MCPTool    string
	HostTierIn string // the host tier directory (for shared tiers: under a shared mount)
}

// SharedGrant is a shared space the agent may read or write.
type SharedGrant struct {
	Space   string
	HostDir string
	Write   bool
}

// PlanInput is everything BuildPlan needs, gathered by the caller: the
// agent, the run, and facts about the host. BuildPlan reads nothing itself.
type PlanInput struct {
	Agent     *Agent
	Iso       string // the effective isolation: userns or uid
	CallerUID uint32
	CallerGID uint32

	RootDir    string // the ctx root on the host
	NewRoot    string // host directory the new root is mounted on
	RootFS     bool   // NewRoot holds the agent's own root filesystem
	SystemDirs []HostDir
	Workspace  string  // host directory shown at /workspace (the caller's cwd)
	AgentHome  string  // home/UID/agent/NAME on the host
	Extra      []Mount // --mount entries of this start
	Tools      []ProjectedTool
	Shared     []SharedGrant
	ProcDir    string // host directory shown read-only at /mnt/proc
	SkillsDir  string // host directory shown at /mnt/skills, or ""
	SOP        []byte // /mnt/SOP
	Network    bool   // network:default connect is granted

	Cwd  string // inside; default /workspace
	Env  []string
	Argv []string
	Exe  string
}

// Sandbox paths.
const (
	SandboxWorkspace = "/workspace"
	SandboxMnt       = "/mnt"
	tmpSize          = "512m"
)

// maskedStartupFiles are the host shell startup files hidden from the agent:
// a login shell inside must not run the host's profile.
var maskedStartupFiles = []string{"/etc/profile", "/etc/bash.bashrc", "/etc/profile.d"}

// devNodes are the device files the sandbox's /dev holds.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// BuildPlan computes the sandbox of one run. The order of operations is
// the order of mounting: later mounts cover earlier ones.
func BuildPlan(in PlanInput) (*Plan, error) {
	a := in.Agent
	if in.Iso != "userns" && in.Iso != "uid" {
		return nil, fmt.Errorf("sandbox: isolation %q builds no sandbox", in.Iso)
	}
	var ops []Op
	add := func(op Op) { ops = append(ops, op) }
	ro := func(src, dst, why string) Op {
		return Op{Kind: OpBind, Source: src, Target: dst, ReadOnly: true, NoSuid: true, NoDev: true, Why: why}
	}

	// The host's system directories, read-only, with shell startup files
	// masked.
	if !in.RootFS {
		for _, d := range in.SystemDirs {
			if d.Symlink != "" {
				add(Op{Kind: OpSymlink, Source: d.Symlink, Target: d.Path, Why: "system directory"})
				continue
			}
			op := ro(d.Path, d.Path, "system directory")
			op.Recursive, op.Optional = true, true
			add(op)
		}
		for _, f := range maskedStartupFiles {
			add(Op{Kind: OpMask, Target: f, Why: "masking shell startup files"})
		}
	}

	// A minimal /dev, a fresh /proc, a private /tmp.
	add(Op{Kind: OpTmpfs, Target: "/dev", Mode: 0o755, Size: "1m", Why: "/dev"})
	for _, n := range devNodes {
		add(Op{Kind: OpBind, Source: "/dev/" + n, Target: "/dev/" + n, NoSuid: true, NoExec: true, Why: "/dev"})
	}
	add(Op{Kind: OpDevpts, Target: "/dev/pts", Why: "/dev/pts"})
	add(Op{Kind: OpSymlink, Source: "pts/ptmx", Target: "/dev/ptmx"})
	add(Op{Kind: OpSymlink, Source: "/proc/self/fd", Target: "/dev/fd"})
	for i, n := range []string{"stdin", "stdout", "stderr"} {
		add(Op{Kind: OpSymlink, Source: "/proc/self/fd/" + strconv.Itoa(i), Target: "/dev/" + n})
	}
	add(Op{Kind: OpTmpfs, Target: "/dev/shm", Mode: 0o1777, Size: "64m"})
	add(Op{Kind: OpProc, Target: "/proc", Why: "/proc"})
	add(Op{Kind: OpTmpfs, Target: "/tmp", Mode: 0o1777, Size: tmpSize, Why: "/tmp"})

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
		op := ro(s.HostDir, SandboxRoot+"/shared/"+s.Space, "shared space "+s.Space)
		op.ReadOnly = !s.Write
		add(op)
	}
	for _, tier := range a.Path {
		if !within(tier, SandboxRoot) {
			continue // a tier outside /ctx is served by the mount file, if at all
		}
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
	// server, the SOP, and the run's live state, all read-only.
	add(Op{Kind: OpTmpfs, Target: SandboxMnt, Mode: 0o755, Size: "16m", Why: "/mnt"})
	add(Op{Kind: OpDir, Target: SandboxMnt + "/tools"})
	for _, t := range in.Tools {
		add(ro(t.HostPath, SandboxMnt+"/tools/"+t.Name, "/mnt/tools"))
		add(Op{Kind: OpFile, Target: SandboxMnt + "/tools/" + t.Name + ".toolspec.json", Data: t.Schema, Mode: 0o444})
		if t.MCPServer != "" {
			add(ro(t.HostPath, SandboxMnt+"/mcp/"+t.MCPServer+"/"+t.MCPTool, "/mnt/mcp"))
		}
	}
	add(Op{Kind: OpDir, Target: SandboxMnt + "/mcp"})
	if in.SkillsDir != "" {
		add(ro(in.SkillsDir, SandboxMnt+"/skills", "/mnt/skills"))
	} else {
		add(Op{Kind: OpDir, Target: SandboxMnt + "/skills"})
	}
	add(Op{Kind: OpFile, Target: SandboxMnt + "/SOP", Data: in.SOP, Mode: 0o444})
	add(ro(in.ProcDir, SandboxMnt+"/proc", "/mnt/proc"))
	add(Op{Kind: OpReadOnly, Target: SandboxMnt})

	// The agent's home, whose session history it may read but not rewrite:
	// the run host owns the audit trail.
	add(Op{Kind: OpBind, Source: in.AgentHome, Target: SandboxHome, NoSuid: true, NoDev: true, Why: "the agent's home"})
	add(ro(path.Join(in.AgentHome, "session"), SandboxHome+"/session", "the agent's sessions"))

	// The caller's working directory, read-write.
	if in.Workspace != "" {
		add(Op{Kind: OpBind, Source: in.Workspace, Target: SandboxWorkspace, NoSuid: true, NoDev: true, Why: "workspace"})
	}

	// The agent's mount control, then the --mount entries of this start.
	for i, m := range a.Mounts {
		add(mountOp(m, in.RootDir, fmt.Sprintf("mount line %d", i+1)))
	}
	for i, m := range in.Extra {
		add(mountOp(m, in.RootDir, fmt.Sprintf("--mount %d", i+1)))
	}

	if !in.Network {
		add(Op{Kind: OpLoopback})
	}
	add(Op{Kind: OpPivotRoot})
	if !in.RootFS {
		add(Op{Kind: OpReadOnly, Target: "/"})
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
		Hostname:   "ctx-" + a.Name,
		Cwd:        cwd,
		Env:        in.Env,
		Argv:       in.Argv,
		Exe:        in.Exe,
	}
	if in.Iso == "userns" {
		// Only the caller's ids exist in the namespace; supplementary
		// groups cannot be mapped.
		p.Groups = nil
	}
	return p, p.Validate()
}

// mountOp turns a mount entry into a bind operation. Sources written as ABI
// paths (/ctx/...) are re-rooted under the root on the host.
func mountOp(m Mount, rootDir, why string) Op {
	src := m.Source
	if within(src, SandboxRoot) {
		src = rebase(src, SandboxRoot, rootDir)
	}
	return Op{Kind: OpBind, Source: src, Target: m.Target, ReadOnly: m.ReadOnly,
		NoSuid: m.NoSuid, NoDev: m.NoDev, NoExec: m.NoExec, Recursive: m.Bind == BindRecursive, Why: why}
}
