package runhost

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// checkProgramShown refuses, before anything starts, a program its
// sandbox would not find because it lies outside what the sandbox shows
// (a toolchain in the person's home: pyenv shims, nvm, ~/.local/bin): exit
// 127, one line naming the path and the mount line that shows it. A path
// the sandbox shows, or one the host has not either, is left to the
// sandbox. exe is the program the run host chose itself (tsh), if any.
func (r *AgentRun) checkProgramShown(e *cli.Env, exe string) (int, bool) {
	if exe != "" || len(r.argv) == 0 || r.plan == nil || r.plan.RootFS {
		return 0, true
	}
	name := r.argv[0]
	var msg string
	switch {
	case filepath.IsAbs(name):
		if ShownAt(r.plan, name) != "" || !isExecutableFile(name) {
			return 0, true
		}
		msg = fmt.Sprintf("%s is outside what its sandbox shows (iso %s), so it is not found there; fix: %s",
			name, r.iso, MountLineFix(r.Root, r.Agent.Name, filepath.Dir(name)))
	case strings.Contains(name, "/") || name == "":
		return 0, true // relative to the working directory inside
	default:
		sandboxPath := envValue(r.env, "PATH")
		for _, dir := range filepath.SplitList(sandboxPath) {
			h := ShownAt(r.plan, filepath.Join(dir, name))
			if filepath.IsAbs(dir) && h != "" && isExecutableFile(h) {
				return 0, true
			}
		}
		host := lookPathIn(name, e.Getenv("PATH"))
		if host == "" {
			return 0, true
		}
		msg = fmt.Sprintf("%s is not on its sandbox's PATH (%s); yours has it at %s, outside what the sandbox shows (iso %s); fix: %s, and run it by that path (or add its directory to PATH in agent/%s.d/env)",
			name, sandboxPath, host, r.iso, MountLineFix(r.Root, r.Agent.Name, filepath.Dir(host)), r.Agent.Name)
	}
	return cli.Fail(e, cli.NotFound, "agent %s: %s", r.Agent.Name, cli.Escape(msg)), false
}

// ShownAt is sandboxplan.PlanHostPath, in iso landlock of the host path p
// leads to: Landlock rules are on the files links lead to (a merged-/usr
// /bin is /usr/bin's).
func ShownAt(plan *sandboxplan.Plan, p string) string {
	if plan.Iso == string(policy.IsoLandlock) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
	}
	return sandboxplan.PlanHostPath(plan, p)
}

// MountLineFix says how to show host directory dir, read-only at the same
// path, in agent name's sandboxes: a line of its mount control (ctx man
// policy, mount), set by a command that keeps the lines it has, or
// --mount for one start.
func MountLineFix(root fsops.Root, name, dir string) string {
	q := fsops.ShellQuote(dir)
	value := fmt.Sprintf(`"$(printf '%%s\t%%s\tro\trbind,nosuid,nodev' %s %s)"`, q, q)
	file := filepath.Join(root.AgentControl(name), "mount")
	if b, _ := fsops.ReadControl(file); len(bytes.TrimSpace(b)) > 0 {
		// The lines it has, then the new one on a line of its own.
		value = fmt.Sprintf(`"$(cat %s)$(printf '\n%%s\t%%s\tro\trbind,nosuid,nodev' %s %s)"`, fsops.ShellQuote(file), q, q)
	}
	return fmt.Sprintf(`show %s read-only with a line of agent/%s.d/mount: ctx set%s agent/%s.d/mount %s (or, for one start, --mount %s %s ro)`,
		dir, name, root.Option(), name, value, q, q)
}

// isExecutableFile reports whether p (followed) is a regular file with an
// x bit, as the run host sees it.
func isExecutableFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// lookPathIn finds name in the absolute directories of pathVar, "" when
// none has it.
func lookPathIn(name, pathVar string) string {
	for _, dir := range filepath.SplitList(pathVar) {
		if p := filepath.Join(dir, name); filepath.IsAbs(dir) && isExecutableFile(p) {
			return p
		}
	}
	return ""
}

// envValue is KEY's value in env (KEY=VALUE entries; the last wins), "".
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if s, ok := strings.CutPrefix(kv, key+"="); ok {
			v = s
		}
	}
	return v
}

// ViewPlan is the plan a start of agent a by caller here, in iso, would
// build for its view: what its sandbox shows of the host, without tools
// or a run, the current directory as the workspace; nil when it cannot be
// made (doctor's account of an agent's PATH).
func ViewPlan(root fsops.Root, a *policy.Agent, caller uint32, iso policy.Iso) *sandboxplan.Plan {
	cwd, _ := os.Getwd()
	home := root.AgentHome(int(a.UID), a.Name)
	in := sandboxplan.PlanInput{Agent: a, Iso: string(iso), CallerUID: caller, RootDir: root.Dir, SystemDirs: systemDirs(),
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
		in.RootFS = hasRootFS(in.NewRoot)
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
	p := envValue(sandboxplan.SandboxEnv(a, sandboxplan.RunSettings{}), "PATH")
	if iso == policy.IsoLandlock || iso == policy.IsoShared {
		p = sharedPATH(root, p)
	}
	return p
}
