package toolchain

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"ctx/applets/authority"
	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// What a sandbox of an agent shows of the host, for the run host's plan
// and for doctor's account of an agent's PATH (ViewPlan, ProgramPATH).

// ViewPlan is the plan a start of agent a by caller here, in iso, would
// build for its view: what its sandbox shows of the host, without tools
// or a run, the current directory as the workspace; nil when it cannot be
// made (doctor's account of an agent's PATH).
func ViewPlan(root fsops.Root, a *policy.Agent, caller uint32, iso policy.Iso) *sandboxplan.Plan {
	cwd, _ := os.Getwd()
	home := root.AgentHome(int(a.UID), a.Name)
	in := sandboxplan.PlanInput{Agent: a, Iso: string(iso), CallerUID: caller, RootDir: root.Dir, SystemDirs: SystemDirs(),
		Workspace: cwd, AgentHome: home, ProcDir: filepath.Join(home, "run"), Argv: []string{"tsh"}, Cwd: sandboxplan.SandboxWorkspace}
	var plan *sandboxplan.Plan
	var err error
	switch iso {
	case policy.IsoLandlock:
		in.HostTiers = authority.ToolDirs(root, a)
		plan, err = sandboxplan.BuildLandlockPlan(in)
	case policy.IsoUserns, policy.IsoUID:
		in.NewRoot = filepath.Join(home, "root")
		if a.Root != "" {
			in.NewRoot = authority.Reroot(root, a.Root)
		}
		in.RootFS = HasRootFS(in.NewRoot)
		plan, err = sandboxplan.BuildPlan(in)
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	return plan
}

// ProgramPATH is the PATH agent a's program gets in iso (its env
// control's, else the default), as host paths where the run has no
// mounts.
func ProgramPATH(root fsops.Root, a *policy.Agent, iso policy.Iso) string {
	p := proc.EnvPath(sandboxplan.SandboxEnv(a, sandboxplan.RunSettings{}), "")
	if iso == policy.IsoLandlock || iso == policy.IsoShared {
		p = SharedPATH(root, p)
	}
	return p
}

// SystemDirs describes the host directories the sandbox shows read-only.
func SystemDirs() []sandboxplan.HostDir {
	var out []sandboxplan.HostDir
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"} {
		st, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err == nil {
				out = append(out, sandboxplan.HostDir{Path: d, Symlink: target})
			}
			continue
		}
		if st.IsDir() {
			out = append(out, sandboxplan.HostDir{Path: d})
		}
	}
	return out
}

// HasRootFS reports whether an agent's root directory holds a root
// filesystem of its own (then it is the new root; else a fresh tmpfs is).
func HasRootFS(dir string) bool {
	for _, d := range []string{"usr", "bin"} {
		if _, err := os.Lstat(filepath.Join(dir, d)); err == nil {
			return true
		}
	}
	return false
}

// SharedPATH is the program's PATH in an iso=shared run. A sandbox mounts
// the tree at /ctx, so its PATH starts with /ctx/bin; with no sandbox the
// tree is wherever the root is, so each /ctx component (the default one or
// one from the agent's env control) is mapped to the same place under the
// root, and every other component is left as it is.
func SharedPATH(root fsops.Root, path string) string {
	parts := strings.Split(path, ":")
	for i, p := range parts {
		parts[i] = authority.Reroot(root, p)
	}
	return strings.Join(parts, ":")
}

// AgentManagers says where the managers of the shim table keep their
// homes for agent a's runs: its env control's variables, else getenv's
// (the caller's environment; nil for none), else home's defaults.
func AgentManagers(a *policy.Agent, getenv func(string) string, home string) Managers {
	return Managers{Agent: sandboxplan.SandboxEnv(a, sandboxplan.RunSettings{}), Caller: getenv, Home: home}
}
