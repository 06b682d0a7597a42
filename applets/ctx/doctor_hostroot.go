package ctx

import (
	"ctx/applets/authority"
	"ctx/fsops"
)

// checkHostRoot reports every agent that a root caller would run as host
// root (DESIGN §16 rule 1): uid 0, or iso shared in a tree root owns. ctx
// agent start refuses such an agent unless --allow-host-root is given.
func checkHostRoot(root fsops.Root) []fsops.Finding {
	var out []fsops.Finding
	names, _ := root.AgentNames()
	for _, name := range names {
		a, err := authority.LoadAgent(root, name)
		if err != nil || !a.RunsAsHostRoot(0) {
			continue // invalid controls are checkControls' to report
		}
		rel, why := "agent/"+name+".d/uid", "uid 0"
		if a.UID != 0 {
			if a.Owner != 0 {
				continue // only root itself could start it, as its owner's agent
			}
			rel, why = "agent/"+name+".d/iso", "iso shared runs it as the caller, root"
		}
		out = append(out, fsops.Finding{Status: "invalid", Rel: rel,
			Detail: "agent " + name + " would run as host root (" + why + "); give it an unprivileged uid, or ctx agent start refuses it without --allow-host-root"})
	}
	return out
}
