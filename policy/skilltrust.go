package policy

import (
	"fmt"
	"io/fs"
)

// SkillTrust decides whether a shared skill bundle may be shown to the
// agents that may read its space (ctx man agentrc, Skills). A bundle is
// instructions every such agent reads as its own, so no agent may be able
// to change it: target (the bundle's directory) and the directories above
// it must lie outside every directory an agent of the tree may write (a
// shared space it is granted write on, its home, a read-write mount entry),
// and nothing from the tree root down to target and in it may be a
// symlink or owned by an agent's uid (in a root tree an agent owns what it
// made). components are the facts of that walk, as for TierTrust.
//
// Unlike TierTrust it does not refuse group- or world-writable modes: a
// skill is never executed by the host, and agents write the host only
// through what their sandbox mounts, which the writers rule covers; the
// people of a space's group may keep its skills.
func SkillTrust(target string, components []FileFacts, t TrustFacts) (bool, string) {
	for _, w := range t.Writers {
		if Within(target, w.Dir) || anyWithin(components, w.Dir) {
			return false, t.name(w.Dir) + " is writable by agent " + w.Agent
		}
	}
	for _, c := range components {
		if c.Mode&fs.ModeSymlink != 0 {
			return false, t.name(c.Path) + " is a symlink (its target is not checked)"
		}
		if agent, ok := t.AgentUIDs[c.UID]; ok && !t.trustedOwner(c.UID) {
			return false, fmt.Sprintf("%s is owned by uid %d of agent %s", t.name(c.Path), c.UID, agent)
		}
	}
	return true, ""
}
