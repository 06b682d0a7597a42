package sandboxplan

import (
	"fmt"
	"path"

	"ctx/policy"
)

// WorkspaceProtect is what the host found at start for the protected set
// (PlanInput.Protect): the paths to make read-only and the git
// directories outside the workspace that a .git file of the workspace
// points to.
type WorkspaceProtect struct {
	// Paths are relative to the workspace, each an existing file or
	// directory (never a symlink, checked again when the mount is made),
	// none inside another.
	Paths []string
	// GitDirs are a linked worktree's git directories outside the
	// workspace, shown read-only so git works inside.
	GitDirs []GitDirMount
}

// GitDirMount is a git directory outside the workspace: Host is where it
// is (symlinks resolved), Sandbox where the .git file's path leads inside
// the sandbox (the same path when the file names it absolutely).
type GitDirMount struct {
	Host    string
	Sandbox string
}

// ProtectOps are the plan's operations for the protected set, to follow
// the workspace bind: each protected path made read-only in place (so the
// workspace's own options, its idmapping included, carry over; no host
// path is bound for it), when the agent may write the workspace at all,
// then each outside git directory bound read-only where the .git file
// leads.
func ProtectOps(wp *WorkspaceProtect, canWrite bool) []Op {
	if wp == nil {
		return nil
	}
	var ops []Op
	if canWrite {
		for _, rel := range wp.Paths {
			ops = append(ops, Op{Kind: OpProtectPath, Target: path.Join(SandboxWorkspace, rel), Why: "protect " + rel})
		}
	}
	for _, g := range wp.GitDirs {
		ops = append(ops, Op{Kind: OpBind, Source: g.Host, Target: g.Sandbox, ReadOnly: true, NoSuid: true, NoDev: true, NoExec: true,
			Why: "protect: git directory " + g.Host})
	}
	return ops
}

// GitDirTargetAllowed reports whether a git directory outside the
// workspace may be shown at dir in the sandbox: an absolute clean path
// that none of the sandbox's own places holds.
func GitDirTargetAllowed(dir string) error {
	if reason, ok := policy.CheckAbsPath(dir); !ok {
		return fmt.Errorf("%s", reason)
	}
	for _, p := range []string{"/bin", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/mnt", "/proc", "/sbin", "/sys", "/usr",
		SandboxRoot, SandboxWorkspace, SandboxHome} {
		if policy.Within(dir, p) || policy.Within(p, dir) {
			return fmt.Errorf("%s is where the sandbox has %s", dir, p)
		}
	}
	return nil
}
