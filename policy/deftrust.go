package policy

// The definition-trust rule (DESIGN §16 rule 12): in a tree several uids
// use, ctx never starts an agent another uid defined and never adopts a
// home it did not make. Both are the tool-trust rule's owner and mode
// parts (TierTrust) applied to other walks; the writers part is the tool
// path's alone.

// AgentDefTrust decides whether caller may start an agent from its
// definition. components are the walk from the tree root down to agent/,
// then the agent file agent/NAME when present, then agent/NAME.d with
// every entry in it (each directory before its entries): every control a
// start reads (policy, perm, mount, env, budgets, iso, path, label,
// hooks...). Each must be owned by root, the tree owner or the caller
// itself and writable by no one else. It returns the index of the first
// component that fails (-1 when trusted) and why.
func AgentDefTrust(components []FileFacts, t TrustFacts, caller uint32) (int, string) {
	t.Writers = nil
	t.Also = append(append([]uint32(nil), t.Also...), caller)
	return t.ownersFirst(components)
}

// HomeTrust decides whether an existing agent home may be adopted.
// components are the walk from the tree root down to home/UID/agent/NAME
// (what exists of it) and then each existing directory of the home
// (session, root, data, cache, log). Each must be owned by root, the tree
// owner or uid (the home's own: the directories the agent writes, or a
// person's own home/UID) and writable by no one else: anything else was
// made by another uid, who may have planted what the agent would run.
// It returns the index of the first that fails (-1 when trusted) and why.
func HomeTrust(components []FileFacts, t TrustFacts, uid uint32) (int, string) {
	t.Writers = nil
	t.Also = append(append([]uint32(nil), t.Also...), uid)
	return t.ownersFirst(components)
}

// ownersFirst is components, except that a component another uid owns is
// named first: below a sticky directory that is the one to remove, not
// the sticky directory above it.
func (t TrustFacts) ownersFirst(components []FileFacts) (int, string) {
	for i, c := range components {
		if !t.trustedOwner(c.UID) {
			return i, t.foreignOwner(c)
		}
	}
	return t.components(components)
}
