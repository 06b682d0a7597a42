package ctx

import (
	"os"
	"path/filepath"

	"ctx/applets/cli"
	"ctx/applets/runhost"
	"ctx/fsops"
	"ctx/policy"
)

// pathViewFindings are doctor's account of the directories of agent a's
// PATH that its sandbox in iso would not show: nothing there is found
// (ctx agent start says so of a program too). The view is the plan a
// start here would build (runhost.ViewPlan); the fix is the mount line
// that shows the directory, or taking it off PATH when the host has no
// such directory either.
func pathViewFindings(root fsops.Root, a *policy.Agent, caller uint32, iso policy.Iso, fixes map[fsops.Finding]string) []fsops.Finding {
	plan := runhost.ViewPlan(root, a, caller, iso)
	if plan == nil || plan.RootFS {
		return nil
	}
	var out []fsops.Finding
	for _, dir := range filepath.SplitList(runhost.ProgramPATH(root, a, iso)) {
		if !filepath.IsAbs(dir) || runhost.ShownAt(plan, dir) != "" {
			continue
		}
		f := fsops.Finding{Status: "invalid", Rel: "agent/" + a.Name + ".d/env",
			Detail: cli.Escape("PATH has " + dir + ", which the sandbox does not show (iso " + string(iso) + "): no program there is found")}
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			fixes[f] = cli.Escape(runhost.MountLineFix(root, a.Name, dir))
		} else {
			fixes[f] = cli.Escape("the host has no directory " + dir + " either: take it off PATH in agent/" + a.Name + ".d/env")
		}
		out = append(out, f)
	}
	return out
}
