package sandboxplan

import (
	"fmt"
	"path"
	"strings"

	"ctx/policy"
)

// iso landlock runs the agent without namespaces: nothing is mounted, and
// the agent sees the host's own paths, restricted by Landlock to what its
// sandbox would have mounted (with the same read/write split and the same
// execute rights from perm x), behind the same seccomp filter, limits,
// session and descriptors. /ctx and /mnt have no mounts to be at: the
// agent finds the tree at CTX_ROOT, its run's files (identity, policy,
// budgets, audit, the broker socket) at CTX_RUN_DIR, and its tools through
// CTX_PATH, all host paths. BuildLandlockPlan decides the rules; the
// sandbox init applies them (fsops).

// landlockDevices are the device files an agent may open for reading and
// writing, with terminal ioctls.
var landlockDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// landlockEtc are host /etc files an agent may read besides HostEtcNames:
// the host's users and groups (names only: no shadow), hosts and name
// service configuration, which programs need to resolve anything, and
// git's system config, which git refuses to run without when it exists
// but cannot be read.
var landlockEtc = []string{"passwd", "group", "hosts", "hostname", "nsswitch.conf", "ld.so.conf", "ld.so.conf.d", "gitconfig"}

// BuildLandlockPlan computes an iso landlock run: the rules of its one
// wall, its limits and its program. in.Workspace, AgentHome, RootDir,
// ProcDir (the run directory) and the tools' HostPath are host paths; Cwd
// defaults to the workspace.
//
// long: one commented section per place an agent may reach (the
// Landlock counterpart of BuildPlan's mounts), sharing the rule helpers.
func BuildLandlockPlan(in PlanInput) (*Plan, error) {
	a := in.Agent
	canWrite := a.Ceiling.Has(policy.CeilingWrite)
	canExec := a.Ceiling.Has(policy.CeilingExec)
	var access []AccessRule
	read := func(p string, exec bool) {
		access = append(access, AccessRule{Path: p, Exec: exec && canExec, Optional: true})
	}
	// Where it may write it may connect to unix sockets: they are the
	// run's own (Landlock ABI 9; below it the unix gate, Plan.UnixGate).
	write := func(p string, exec bool) {
		access = append(access, AccessRule{Path: p, Write: canWrite, Exec: exec && canExec, Optional: true, Connect: canWrite})
	}
	for _, d := range in.SystemDirs {
		if d.Path == "/etc" || d.Symlink != "" {
			continue // a merged-/usr link is covered by /usr
		}
		read(d.Path, true)
	}
	for _, n := range append(append([]string(nil), landlockEtc...), HostEtcNames...) {
		if n == "resolv.conf" && !in.Network {
			continue
		}
		read("/etc/"+n, false)
	}
	for _, d := range landlockDevices {
		access = append(access, AccessRule{Path: d, Write: true, Dev: true, Optional: true})
	}
	read("/proc", false)
	root := func(rel string) string { return path.Join(in.RootDir, rel) }
	read(root("bin"), true)
	// Every agent's definition, as any user of the host may read it: the
	// tool trust rule needs to know every agent's uid and writable places
	// (a namespace sandbox shows only the agent's own; the run host's
	// verdict stands in there).
	read(root("agent"), false)
	read(root("shared/cortexfs-docs"), false)
	for _, s := range in.Shared {
		if s.Write {
			write(s.HostDir, true)
		} else {
			read(s.HostDir, false)
		}
	}
	execPaths := []string{root("bin")}
	// The tiers themselves, for listing and lookup (tsh, CTX_PATH): a
	// tool's file that is not granted may be read there but runs with
	// the agent's own authority only, and is not brokered.
	for _, tier := range in.HostTiers {
		read(tier, false)
	}
	for _, t := range in.Tools {
		read(t.HostPath, true)
		read(t.HostDotD, false)
		execPaths = append(execPaths, t.HostPath)
	}
	if in.ProcDir != "" {
		// The run's files and its broker socket: the one place a unix
		// socket may be connected to (Landlock ABI 9; below it the unix
		// gate, Plan.UnixGate).
		access = append(access, AccessRule{Path: in.ProcDir, Optional: true, Connect: true})
	}
	// The home: readable whole, its session history included; writable
	// only where the agent keeps its own things, and at its top where
	// HomeTop says the held directories keep the agent out themselves.
	if in.HomeTop != nil && canWrite {
		access = append(access, AccessRule{Path: in.AgentHome, Write: true, KeepDirs: true, Exec: canExec, Optional: true})
		for _, d := range in.HomeTop.Dirs {
			write(d, true)
		}
	} else {
		read(in.AgentHome, false)
		for _, sub := range HomeWritableDirs {
			write(path.Join(in.AgentHome, sub), true)
		}
	}
	if in.Workspace != "" {
		write(in.Workspace, true)
	}
	// A linked worktree's git directory, outside the workspace: readable
	// where the .git file leads (the host path itself, no mounts here),
	// so git works; ProtectLandlock keeps it from being written.
	if in.Protect != nil {
		for _, g := range in.Protect.GitDirs {
			read(g.Host, false)
		}
	}
	for _, m := range append(append([]policy.Mount(nil), a.Mounts...), in.Extra...) {
		src := m.Source
		if policy.Within(src, SandboxRoot) {
			src = policy.Rebase(src, SandboxRoot, in.RootDir)
		}
		if m.ReadOnly {
			read(src, !m.NoExec)
		} else {
			write(src, !m.NoExec)
		}
	}
	cwd := in.Cwd
	if cwd == "" || policy.Within(cwd, SandboxWorkspace) {
		cwd = in.Workspace + strings.TrimPrefix(cwd, SandboxWorkspace)
	}
	p := &Plan{
		Iso:       string(policy.IsoLandlock),
		UID:       a.UID,
		GID:       a.GID,
		Groups:    a.Groups,
		OuterUID:  in.CallerUID,
		OuterGID:  in.CallerGID,
		Cwd:       cwd,
		Env:       in.Env,
		Argv:      in.Argv,
		Exe:       in.Exe,
		Access:    access,
		ExecAll:   canExec,
		DenyTCP:   !in.Network,
		NoNetwork: !in.Network,
		Limits:    processLimits(in.Budgets, in.Cgroup),
	}
	if e := in.Egress; e != nil && e.ConnectPort != 0 && !in.Network {
		// TCP to the run host's proxy port alone (Landlock's port
		// rule), TCP sockets only (the filter): fsops applies both.
		p.Egress, p.NoNetwork = e, false
	}
	if !canExec {
		p.ExecPaths = execPaths
	}
	return p, p.Validate()
}

// ProtectLandlock makes targets (host paths of the protected set:
// workspace paths, a worktree's git directory) read-only in an iso
// landlock plan: every writable rule that holds one is decomposed
// (ProtectAccess, over the directories list reads), and the plan is
// checked again.
func ProtectLandlock(p *Plan, targets []string, list ProtectLister) (*ProtectDecomposition, error) {
	if len(targets) == 0 {
		return &ProtectDecomposition{Access: p.Access}, nil
	}
	d, err := ProtectAccess(p.Access, targets, list)
	if err != nil {
		return nil, err
	}
	p.Access = d.Access
	return d, p.Validate()
}

// validateLandlock checks an iso landlock plan: no namespaces and no
// mounts (it has none to make), absolute rule paths, a program and an
// absolute cwd.
func (p *Plan) validateLandlock() error {
	if p.Namespaces != (Namespaces{}) || len(p.Ops) > 0 {
		return fmt.Errorf("plan: iso landlock makes no namespace and no mount")
	}
	if len(p.Argv) == 0 {
		return fmt.Errorf("plan: no program to run")
	}
	if !path.IsAbs(p.Cwd) {
		return fmt.Errorf("plan: cwd %q is not absolute", p.Cwd)
	}
	if len(p.Access) == 0 {
		return fmt.Errorf("plan: iso landlock without access rules")
	}
	for i, r := range p.Access {
		if !path.IsAbs(r.Path) || path.Clean(r.Path) != r.Path {
			return fmt.Errorf("plan: access rule %d: %q is not an absolute clean path", i, r.Path)
		}
	}
	return nil
}
