package policy

import (
	"fmt"
	"syscall"
)

// AttenuationError names the control of a child agent that would hold more
// authority than its parent, and the widening. It unwraps to EACCES.
type AttenuationError struct {
	Control string
	Reason  string
}

func (e *AttenuationError) Error() string {
	return "child widens " + e.Control + ": " + e.Reason
}

func (e *AttenuationError) Unwrap() error { return syscall.EACCES }

func widening(control, format string, args ...any) error {
	return &AttenuationError{Control: control, Reason: fmt.Sprintf(format, args...)}
}

// Attenuate checks that child holds no authority parent lacks. Checked in
// this order, the first widening is returned:
//
//	label   the child's subject is the parent's (its label may differ
//	        only outside the type field)
//	policy  every child rule is allowed by the parent's policy (a
//	        network rule: everything it names is within the parent's
//	        network grants, so *.example.com covers api.example.com)
//	perm    child ceiling ⊆ parent ceiling
//	uid     the child runs as the parent's uid
//	gid     the child's gid is the parent's gid or one of its groups
//	groups  every child group is the parent's gid or one of its groups
//	mount   every child entry has a parent entry with the same source and
//	        target; rw may become ro, never the reverse; the parent's
//	        nosuid, nodev and noexec stay; bind never becomes rbind
//	path    the child's tool path is a subsequence of the parent's
//	protect every path the parent's protected set holds, the child's does
//	        (the child may protect more, never less)
//
// Whether the parent may create this child at all (agent:CHILD create in
// its policy) is a separate Check.
func Attenuate(parent, child *Agent) error {
	// The subject first: every other layer (a tool's own policy, a shared
	// space's, the network's) grants by subject, so a child under another
	// agent's subject would hold that agent's grants there, which no check
	// of the parent's own policy sees.
	if child.Subject != parent.Subject {
		return widening("label", "subject %s is not the parent's %s: a child keeps its parent's subject (tool policies, shared spaces and the network grant by subject)", child.Subject, parent.Subject)
	}
	var parentNet *NetworkGrants
	for _, r := range child.Policy.Rules() {
		if parent.Policy.Allows(r.Subject, r.Object, r.Permission) {
			continue
		}
		if r.Object.Class == ClassNetwork && r.Subject == parent.Subject {
			// A named network rule is within the parent's when the
			// parent's grants reach everything it names.
			if parentNet == nil {
				parentNet = NetworkGrantsOf(parent.Policy, parent.Subject)
			}
			if t, err := ParseNetworkTarget(r.Object.Name); err == nil {
				if _, ok := parentNet.Covers(t); ok {
					continue
				}
			}
		}
		return widening("policy", "rule %q is not in the parent's policy", r)
	}
	if extra := child.Ceiling &^ parent.Ceiling; extra != 0 {
		return widening("perm", "perm %s exceeds the parent's %s (adds %s)", child.Ceiling, parent.Ceiling, extra.letters())
	}
	if child.UID != parent.UID {
		return widening("uid", "uid %d is not the parent's uid %d", child.UID, parent.UID)
	}
	if !parent.inGroup(child.GID) {
		return widening("gid", "gid %d is neither the parent's gid nor one of its groups", child.GID)
	}
	for _, g := range child.Groups {
		if !parent.inGroup(g) {
			return widening("groups", "group %d is neither the parent's gid nor one of its groups", g)
		}
	}
	for _, cm := range child.Mounts {
		if err := mountWithin(cm, parent.Mounts); err != nil {
			return err
		}
	}
	if !isSubsequence(child.Path, parent.Path) {
		return widening("path", "tool path %q is not an ordered subset of the parent's %q", child.Path, parent.Path)
	}
	childSet := EffectiveProtect(child.Protect)
	for _, p := range EffectiveProtect(parent.Protect) {
		if !ProtectCovers(childSet, p) {
			return widening("protect", "%s is protected for the parent, not for the child", quote(p.String()))
		}
	}
	return nil
}

func mountWithin(cm Mount, parent []Mount) error {
	for _, pm := range parent {
		if pm.Source != cm.Source || pm.Target != cm.Target {
			continue
		}
		line := quote(cm.Source) + " -> " + quote(cm.Target)
		switch {
		case pm.ReadOnly && !cm.ReadOnly:
			return widening("mount", "%s is rw where the parent's is ro", line)
		case pm.NoSuid && !cm.NoSuid:
			return widening("mount", "%s drops the parent's nosuid", line)
		case pm.NoDev && !cm.NoDev:
			return widening("mount", "%s drops the parent's nodev", line)
		case pm.NoExec && !cm.NoExec:
			return widening("mount", "%s drops the parent's noexec", line)
		case cm.Bind.rank() > pm.Bind.rank():
			return widening("mount", "%s is rbind where the parent's is a plain bind", line)
		}
		return nil
	}
	return widening("mount", "%s -> %s is not one of the parent's mounts", quote(cm.Source), quote(cm.Target))
}

// isSubsequence reports whether sub appears in seq in order (not
// necessarily adjacent).
func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, s := range seq {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}
