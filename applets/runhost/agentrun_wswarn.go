package runhost

import (
	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/policy"
)

// workspaceWriteLine warns, at start and in the run's policy account, when
// the agent will run as its own uid on the workspace as it is and cannot
// write it (policy.WorkspaceWriteWarning): iso landlock started by root
// (what a chroot or a container without user namespaces gets), or iso uid
// whose workspace could not be idmapped. Returns the policy line, or "".
func (r *AgentRun) workspaceWriteLine(e *cli.Env, idmapWhy string) string {
	asItIs := r.iso == policy.IsoLandlock || (r.iso == policy.IsoUID && idmapWhy != "")
	if r.callerUID != 0 || !asItIs || r.workspace == "" {
		return ""
	}
	f := authority.FileFacts(r.workspace)
	if f == nil {
		return ""
	}
	w := policy.WorkspaceWriteWarning(r.Agent, *f)
	if w == "" {
		return ""
	}
	if !r.planOnly {
		cli.Warnf(e, "agent %s: %s", r.Agent.Name, cli.Escape(w))
	}
	return "workspace warning: " + w
}
