package ctx

import (
	"os"
	"path/filepath"
	"strings"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/policy"
)

// checkGrantedRefused reports, for every agent, each tool its own policy
// grants that the full check still refuses (the tool's own policy, the
// perm ceiling, the file's mode, the tool-trust rule): one line each,
// naming the refusing layer, with the fix that layer needs. These are the
// tools a person thinks they gave and the agent never sees.
func checkGrantedRefused(root fsops.Root, fixes map[fsops.Finding]string) []fsops.Finding {
	entries, _ := os.ReadDir(root.AgentDir())
	var out []fsops.Finding
	for _, en := range entries {
		name, ok := strings.CutSuffix(en.Name(), ".d")
		if !ok || policy.ValidName(name) != nil {
			continue
		}
		a, err := authority.LoadAgent(root, name)
		if err != nil {
			continue // reported by checkControls
		}
		tp := authority.TrustedToolDirs(root, a)
		view := authority.View(root, a)
		for _, r := range a.Policy.Rules() {
			if r.Subject != a.Subject || r.Object.Class != policy.ClassTool || r.Permission != policy.PermExecute {
				continue
			}
			tool := r.Object.Name
			facts, hit := tp.ToolFacts(tool)
			d := policy.Check(a, view, r.Object, r.Permission, facts)
			if _, builtin := toolrun.BuiltinTools[tool]; d.Allowed || (hit.Path == "" && builtin) {
				continue // a builtin's missing file is the tree check's
			}
			f := fsops.Finding{Status: "refused", Rel: "agent/" + name + ".d/policy",
				Detail: cli.Escape("grants tool:" + tool + " but " + tool + " is refused by " + string(d.Layer) + ": " + d.Reason)}
			out = append(out, f)
			fixes[f] = grantFix(root, a, tool, d.Layer, hit)
		}
	}
	return out
}

// grantFix is the command or step that lifts a refusal by layer.
func grantFix(root fsops.Root, a *policy.Agent, tool string, layer policy.Layer, hit fsops.ToolHit) string {
	explain := " (ctx policy explain" + rootOpt(root) + " " + a.Name + " tool:" + tool + " execute shows every layer)"
	switch {
	case hit.Path == "":
		return "install " + tool + " in a tier of agent " + a.Name + "'s path, or ctx policy revoke" + rootOpt(root) + " --in agent/" + a.Name + ".d/policy " + a.Subject + " tool:" + tool + " execute"
	case layer == policy.LayerToolPolicy:
		in := filepath.Join(hit.ControlDir, "policy")
		if rel := root.RelPath(in); rel != "" {
			in = rel
		}
		return "ctx policy allow" + rootOpt(root) + " --in " + shellQuote(in) + " " + a.Subject + " tool:" + tool + " execute"
	case layer == policy.LayerPerm:
		return "widen agent " + a.Name + "'s perm: ctx set" + rootOpt(root) + " agent/" + a.Name + ".d/perm RWX" + explain
	}
	return "see the layer's reason" + explain
}
