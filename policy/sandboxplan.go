package policy

import (
	"fmt"
	"path"
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
