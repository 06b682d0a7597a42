package ctx

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"ctx/applets/authority"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/policy"
)

// runtimeOwned are controls ctx itself writes at run time; their values have
// no grammar to check.
var runtimeOwned = map[string]bool{"status": true, "pid": true, "name": true, "log": true}

// controlKind says which grammar a file under the root follows: the control
// of an agent or a tool (class and control name), tsh's config, or a home's
// .tshrc. ok is false for files with no grammar.
func controlKind(root fsops.Root, path string) (class, name string, ok bool) {
	rel := root.RelPath(path)
	parts := strings.Split(rel, "/")
	switch {
	case rel == "tool/tsh.d/config":
		return "tsh", "config", true
	case len(parts) == 3 && parts[0] == "home" && parts[2] == ".tshrc":
		return "home", ".tshrc", true
	case len(parts) == 3 && parts[0] == "agent" && strings.HasSuffix(parts[1], ".d"):
		return "agent", parts[2], true
	case len(parts) >= 3 && parts[len(parts)-3] == "tool" && strings.HasSuffix(parts[len(parts)-2], ".d"):
		// tool/T.d/C, home/UID/tool/T.d/C, shared/S/tool/T.d/C
		return "tool", parts[len(parts)-1], true
	}
	return "", "", false
}

// validateControl checks a value for the control file at path against its
// grammar, by the control's class and name: the same parsers every reader
// of the control uses. Files without a grammar pass.
func validateControl(root fsops.Root, path string, value []byte) error {
	class, name, ok := controlKind(root, path)
	if !ok || runtimeOwned[name] {
		return nil
	}
	switch class {
	case "tsh":
		_, err := policy.ParseTshConfig(value)
		return err
	case "home":
		uid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		_, err := policy.ParseTshrc(value, policy.TshrcScope{Root: root.Dir, UID: uid, Home: filepath.Dir(path)})
		return err
	}
	allowed, _ := object.AllowedControls(class)
	known := false
	for _, a := range allowed {
		known = known || a == name
	}
	if !known && !(class == "agent" && contains(policy.AgentControlNames, name)) {
		return nil // a file ctx does not define: the administrator's own
	}
	return object.ValidateControl(class, name, value)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// checkControls is doctor's grammar pass: one line per agent and per tool
// (ok, or invalid naming the file and line), tsh's config and the caller's
// .tshrc. It reads, never writes.
func checkControls(root fsops.Root) []fsops.Finding {
	var out []fsops.Finding
	entries, _ := os.ReadDir(root.AgentDir())
	for _, en := range entries {
		name, ok := strings.CutSuffix(en.Name(), ".d")
		if !ok || policy.ValidName(name) != nil {
			continue
		}
		rel := "agent/" + en.Name()
		if _, err := authority.LoadAgent(root, name); err != nil {
			out = append(out, fsops.Finding{Status: "invalid", Rel: rel, Detail: err.Error()})
			continue
		}
		out = append(out, checkControlFiles(root, root.AgentControl(name), "agent", []string{"system.md", "prompt.template.md", "meta.json"})...)
		out = append(out, fsops.Finding{Status: "ok", Rel: rel, Detail: "controls valid"})
	}
	for _, h := range treeTools(root) {
		findings := checkControlFiles(root, h.ControlDir, "tool", []string{"policy", "schema", "program", "mcp", "cap", "description", "annotations", "input", "output.schema"})
		if len(findings) == 0 {
			findings = append(findings, fsops.Finding{Status: "ok", Rel: root.RelPath(h.ControlDir), Detail: "controls valid"})
		}
		out = append(out, findings...)
	}
	for _, p := range []string{filepath.Join(root.ToolDir(), "tsh.d", "config"), filepath.Join(root.Home(os.Geteuid()), ".tshrc")} {
		b, err := fsops.ReadControl(p)
		if err != nil {
			continue // missing ones are reported with the managed paths
		}
		if err := validateControl(root, p, b); err != nil {
			out = append(out, fsops.Finding{Status: "invalid", Rel: root.RelPath(p), Detail: err.Error()})
		}
	}
	return out
}

// treeTools lists the tools of every tier the tree holds for the caller:
// the system tier, the caller's home tier and each shared space's tier.
func treeTools(root fsops.Root) []fsops.ToolHit {
	tiers := []string{root.ToolDir(), root.UserToolDir(os.Geteuid())}
	spaces, _ := filepath.Glob(filepath.Join(root.Path("shared"), "*", "tool"))
	sort.Strings(spaces)
	tiers = append(tiers, spaces...)
	var out []fsops.ToolHit
	for _, tier := range tiers {
		hits, _ := fsops.ListTools([]string{tier})
		out = append(out, hits...)
	}
	return out
}

// checkProgramControls is bootstrap's share of the seed's rule that the
// program control is "validated by object install, layout inspection, and
// bootstrap": one invalid finding per tool whose program control is
// present and not a valid JSON Schema object. Nothing is written; an
// invalid control only makes its tool ineligible.
func checkProgramControls(root fsops.Root) []fsops.Finding {
	var out []fsops.Finding
	for _, h := range treeTools(root) {
		out = append(out, checkControlFiles(root, h.ControlDir, "tool", []string{"program"})...)
	}
	return out
}

// checkControlFiles validates the named controls present in dir.
func checkControlFiles(root fsops.Root, dir, class string, names []string) []fsops.Finding {
	var out []fsops.Finding
	for _, n := range names {
		p := filepath.Join(dir, n)
		b, err := fsops.ReadControl(p)
		if os.IsNotExist(err) {
			continue
		}
		if err == nil {
			err = object.ValidateControl(class, n, b)
		}
		if err != nil {
			out = append(out, fsops.Finding{Status: "invalid", Rel: root.RelPath(p), Detail: fmt.Sprint(err)})
		}
	}
	return out
}
