package runhost

import (
	"path/filepath"

	"ctx/fsops"
	"ctx/policy/sandboxplan"
)

// landlockHomeLine decides whether an iso landlock run may write its
// home's top (sandboxplan.LandlockHomeTop, on the home as the start finds it:
// its entries and its skills), keeps the grant for the plan, and returns
// the line for the run's policy account. It runs once the run directory
// exists, so run/ is among the entries.
func (r *AgentRun) landlockHomeLine() string {
	home := r.Root.AgentHome(int(r.Agent.UID), r.Agent.Name)
	entries, more, err := fsops.DirEntryFacts(home, sandboxplan.MaxProtectDirEntries)
	var why string
	switch {
	case err != nil:
		why = err.Error()
	case more:
		why = home + " holds too many entries"
	default:
		skills, more, err := fsops.DirEntryFacts(filepath.Join(home, "skills"), sandboxplan.MaxProtectDirEntries)
		if err != nil {
			why = err.Error()
		} else {
			r.homeTop, why = sandboxplan.LandlockHomeTop(r.Agent, home, entries, skills, !more)
		}
	}
	if r.homeTop == nil {
		return "sandbox home " + home + " read-only but for its data, cache, log, root and tmp: " + why
	}
	return "sandbox home " + home + " writable (HOME: new entries, its directories but run session skills; no directory there removed or renamed)"
}
