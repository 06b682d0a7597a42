package sandboxplan

import (
	"fmt"
	"path"
	"strings"

	"ctx/policy"
)

// The plan as data: its operations, the second wall, the identity and
// what Validate checks before the init acts on it. BuildPlan (plan.go)
// decides it.

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
	// Template marks an op of the part of the plan a kept template holds
	// (template.go): an init handed one skips it.
	Template bool `json:"template,omitempty"`
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
	// Connect lets unix sockets beneath Path be connected to where
	// Landlock can say (ABI 9). Namespace modes connect anywhere their
	// mounts show; iso landlock only where the rule says.
	Connect bool `json:"connect,omitempty"`
	// KeepDirs, with Write, withholds removing directories beneath Path:
	// none can be removed or renamed there (an iso landlock home's top,
	// whose held directories must stay in place; sandboxplan.HomeTop).
	KeepDirs bool `json:"keep_dirs,omitempty"`
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
	// NoNetwork (no network grant, every mode) has seccomp allow only
	// AF_UNIX sockets: where no network namespace keeps the agent off the
	// network (iso landlock), and where one does but leaves families such
	// as AF_VSOCK unconfined (userns, uid).
	NoNetwork bool `json:"no_network,omitempty"`
	// UnixGate (iso landlock with a broker) has the init hand every
	// connect(2) of the run to the run host where Landlock cannot keep
	// pathname unix sockets closed (ABI below 9): the broker socket alone
	// is reached (fsops/sandbox/unixgate.go).
	UnixGate bool `json:"unix_gate,omitempty"`
	// Egress is the run's way out through the run host's egress proxy
	// (a run without network:default; egress.go); nil: none.
	Egress *Egress `json:"egress,omitempty"`
}

// Validate checks the plan's own consistency: absolute clean targets
// without "..", known kinds, a pivot last. It is the mechanism's first step,
// so a corrupt plan never starts mounting.
func (p *Plan) Validate() error {
	if p.Egress != nil {
		if err := p.Egress.validate(); err != nil {
			return err
		}
	}
	if p.Iso == string(policy.IsoLandlock) {
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
	return validateTemplate(p.Ops)
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
