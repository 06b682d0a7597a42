package ctx

import (
	"os"
	"path/filepath"
	"strings"

	"ctx/applets/cli"
	"ctx/applets/toolchain"
	"ctx/fsops"
	"ctx/policy"
)

// pathViewFindings are doctor's account of the directories of agent a's
// PATH that its sandbox in iso would not show (nothing there is found;
// ctx agent start says so of a program too), and of those its mount lines
// show whose programs lead, by links and #! lines, to what the sandbox
// does not show (they fail to start there). The view is the plan a start
// here would build (toolchain.ViewPlan); the fix is the mount lines that
// show what is needed (toolchain.PathDirNeeds: a shims directory's whole
// tree, what the programs' links and interpreters lead to), or taking
// the directory off PATH when the host has no such directory either.
func pathViewFindings(root fsops.Root, a *policy.Agent, caller uint32, iso policy.Iso, fixes map[fsops.Finding]string) []fsops.Finding {
	plan := toolchain.ViewPlan(root, a, caller, iso)
	if plan == nil || plan.RootFS {
		return nil
	}
	home, _ := os.UserHomeDir()
	pathVar := toolchain.ProgramPATH(root, a, iso)
	var out []fsops.Finding
	for _, dir := range filepath.SplitList(pathVar) {
		if !filepath.IsAbs(dir) {
			continue
		}
		shown := toolchain.ShownAt(plan, dir) != ""
		if shown && !mountedByLine(a, dir, iso) {
			continue
		}
		detail := "PATH has " + dir + ", which the sandbox does not show (iso " + string(iso) + "): no program there is found"
		st, err := os.Stat(dir)
		if err != nil || !st.IsDir() {
			if !shown {
				f := fsops.Finding{Status: "invalid", Rel: "agent/" + a.Name + ".d/env", Detail: cli.Escape(detail)}
				fixes[f] = cli.Escape("the host has no directory " + dir + " either: take it off PATH in agent/" + a.Name + ".d/env")
				out = append(out, f)
			}
			continue
		}
		dirs, progs := toolchain.PathDirNeeds(plan, dir, pathVar, toolchain.AgentManagers(a, nil, home))
		if len(dirs) == 0 {
			continue
		}
		if shown {
			detail = "PATH has " + dir + ", whose programs " + strings.Join(progs, " ") + " lead to what the sandbox does not show (iso " + string(iso) + "): they do not start there"
		}
		f := fsops.Finding{Status: "invalid", Rel: "agent/" + a.Name + ".d/env", Detail: cli.Escape(detail)}
		fixes[f] = cli.Escape(toolchain.MountLinesFix(root, a.Name, dirs))
		out = append(out, f)
	}
	return out
}

// mountedByLine reports whether a line of a's mount control shows dir
// (its target, in iso landlock its source, at dir or above).
func mountedByLine(a *policy.Agent, dir string, iso policy.Iso) bool {
	for _, m := range a.Mounts {
		at := m.Target
		if iso == policy.IsoLandlock {
			at = m.Source
		}
		if policy.Within(dir, at) {
			return true
		}
	}
	return false
}
