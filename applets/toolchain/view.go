// Package toolchain finds what of a person's toolchains (version
// managers' installs: nvm, pyenv, pipx, ~/.local/bin) a sandbox plan
// shows: the program a run starts and the chain its start goes through
// (links, #! lines, ELF loaders; proc.ProgramChain), the directories a
// mount line must show for it, and the one line that says so. It reads
// links and the first bytes of files; it runs nothing and decides
// nothing: the run host refuses or mounts, doctor reports.
package toolchain

import (
	"os"
	"path/filepath"

	"ctx/fsops/proc"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

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

// IsExecutableFile reports whether p (followed) is a regular file with an
// x bit, as the run host sees it.
func IsExecutableFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// LookPathIn finds name in the absolute directories of pathVar, "" when
// none has it.
func LookPathIn(name, pathVar string) string {
	for _, dir := range filepath.SplitList(pathVar) {
		if p := filepath.Join(dir, name); filepath.IsAbs(dir) && IsExecutableFile(p) {
			return p
		}
	}
	return ""
}

// View maps a path of the sandbox of plan to the host path it is read
// at: the host file the plan shows there, or the same path (what a mount
// line at the same path would show). Iso landlock has no other view than
// the host's.
func View(plan *sandboxplan.Plan) proc.View {
	return func(p string) string {
		if plan.Iso != string(policy.IsoLandlock) {
			if h := sandboxplan.PlanHostPath(plan, p); h != "" {
				return h
			}
		}
		return p
	}
}

// hopShown reports whether the sandbox of plan shows hop h: in iso
// landlock a link always (Landlock rules are on the files links lead
// to), else the plan's view of its path.
func hopShown(plan *sandboxplan.Plan, h proc.Hop) bool {
	if plan.Iso == string(policy.IsoLandlock) && h.Kind == proc.HopLink {
		return true
	}
	return ShownAt(plan, h.Path) != ""
}

// LookPath finds name as the sandbox of plan would by pathVar, its PATH:
// in the first of its directories where the sandbox shows an executable
// of that name, or where the host has one at that path the sandbox does
// not show (the program the PATH means, not found inside); "" for none.
func LookPath(plan *sandboxplan.Plan, pathVar string) func(string) string {
	return func(name string) string {
		for _, dir := range filepath.SplitList(pathVar) {
			if !filepath.IsAbs(dir) {
				continue
			}
			p := filepath.Join(dir, name)
			if h := ShownAt(plan, p); h != "" {
				if IsExecutableFile(h) {
					return p
				}
			} else if IsExecutableFile(p) {
				return p
			}
		}
		return ""
	}
}
