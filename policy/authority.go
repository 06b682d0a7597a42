package policy

import (
	"fmt"
	"io/fs"
	"syscall"
)

// The authority check: may agent A exercise permission P on object O?
//
// Every applicable layer is evaluated, in the seed's order, so `ctx policy
// explain` can show each verdict; the decision is the first refusal. The
// layers by class:
//
//	tool:T execute       linux-permission, mount-visibility, perm, agent-policy, tool-policy
//	shared:S read|write  linux-permission, mount-visibility, agent-policy
//	any other class      agent-policy (for network, a rule covering the
//	                     object: network_explain.go)
//
// The check is pure: what lives on disk (the tool file's owner and mode, its
// policy, the shared directory) is handed in as Facts by the caller.

// Layer names a layer of the check.
type Layer string

const (
	LayerRequest     Layer = "request" // not a layer: the request itself is malformed (EINVAL)
	LayerLinux       Layer = "linux-permission"
	LayerMount       Layer = "mount-visibility"
	LayerPerm        Layer = "perm"
	LayerAgentPolicy Layer = "agent-policy"
	LayerToolPolicy  Layer = "tool-policy"
)

// KnownLayer reports whether s names a layer an event may carry: the
// check's layers, tool-trust, and the layers ctx's tools and hosts name
// (hook, agent-context, caller).
func KnownLayer(s string) bool {
	switch Layer(s) {
	case LayerRequest, LayerLinux, LayerMount, LayerPerm, LayerAgentPolicy, LayerToolPolicy, LayerTrust,
		"hook", "agent-context", "caller":
		return true
	}
	return false
}

// FileFacts describes the object's file on the host, from lstat.
type FileFacts struct {
	Path string      // absolute host path
	Mode fs.FileMode // type and permission bits
	UID  uint32      // owner
	GID  uint32      // group
}

// Facts is what the caller found on disk for the object of a request.
type Facts struct {
	// File is the tool executable (class tool) or the shared space's
	// directory (class shared); nil when it does not exist.
	File *FileFacts
	// ToolPolicy is the parsed tool/T.d/policy beside the executable; nil
	// when it is missing or invalid, which refuses (ToolPolicyErr says why).
	ToolPolicy    *Policy
	ToolPolicyErr error
}

// Verdict is one layer's answer.
type Verdict struct {
	Layer   Layer
	Allowed bool
	Reason  string
}

// Decision is the outcome of a check.
type Decision struct {
	Allowed bool
	// Layer is the first refusing layer (LayerRequest for a malformed
	// request); empty when allowed.
	Layer Layer
	// Errno is 0 when allowed, EACCES when a layer refused, EINVAL when the
	// request is malformed.
	Errno  syscall.Errno
	Reason string
	// Verdicts holds every applicable layer in check order.
	Verdicts []Verdict
}

// Check decides whether agent a, with mount view v, may exercise perm on
// obj, given the facts the caller found on disk.
func Check(a *Agent, v View, obj Object, perm Permission, f Facts) Decision {
	if reason, ok := requestValid(obj, perm); !ok {
		return Decision{Layer: LayerRequest, Errno: syscall.EINVAL, Reason: reason}
	}
	var vs []Verdict
	switch obj.Class {
	case ClassTool:
		vs = []Verdict{
			toolLinux(a, f.File),
			visibility(v, f.File, "tool", true, false),
			toolCeiling(a, obj.Name),
			agentPolicy(a, obj, perm),
			toolPolicy(a, obj, perm, f),
		}
	case ClassShared:
		vs = []Verdict{
			sharedLinux(a, f.File, perm),
			visibility(v, f.File, "shared space", false, perm == PermWrite),
			agentPolicy(a, obj, perm),
		}
	case ClassNetwork:
		vs = []Verdict{networkPolicy(a, obj, perm)}
	default:
		vs = []Verdict{agentPolicy(a, obj, perm)}
	}
	d := Decision{Allowed: true, Verdicts: vs}
	for _, vd := range vs {
		if !vd.Allowed {
			d.Allowed, d.Layer, d.Errno, d.Reason = false, vd.Layer, syscall.EACCES, vd.Reason
			break
		}
	}
	return d
}

func requestValid(obj Object, perm Permission) (string, bool) {
	if obj.Class == 0 || int(obj.Class) >= len(classNames) {
		return "unknown class", false
	}
	if reason, ok := validObjectName(obj.Class, obj.Name); !ok {
		return fmt.Sprintf("%s name %s: %s", obj.Class, quote(obj.Name), reason), false
	}
	if !obj.Class.Accepts(perm) {
		return fmt.Sprintf("unknown permission %s for class %s (%s)", perm, obj.Class, permList(obj.Class)), false
	}
	return "", true
}

// ModeClass returns the rwx bits of f's mode that apply to the agent, and
// which class (owner, group, other) they came from, as the kernel picks
// them: the owner class when the uid matches even if "other" would grant
// more, then the group class for the primary or a supplementary group.
func ModeClass(a *Agent, f *FileFacts) (Ceiling, string) {
	perm := uint32(f.Mode.Perm())
	switch {
	case f.UID == a.UID:
		return Ceiling(perm >> 6 & 7), "owner"
	case a.inGroup(f.GID):
		return Ceiling(perm >> 3 & 7), "group"
	default:
		return Ceiling(perm & 7), "other"
	}
}

func describeFile(a *Agent, f *FileFacts) string {
	return fmt.Sprintf("mode %04o owner %d:%d, agent %d:%d", uint32(f.Mode.Perm()), f.UID, f.GID, a.UID, a.GID)
}

// toolLinux is the linux-permission layer for executing a tool file.
// uid 0 is treated as the kernel treats root: it may execute a regular
// file when any of its three x bits is set.
func toolLinux(a *Agent, f *FileFacts) Verdict {
	vd := Verdict{Layer: LayerLinux}
	switch {
	case f == nil:
		vd.Reason = "no such tool (not found in the tool path)"
	case !f.Mode.IsRegular():
		vd.Reason = fmt.Sprintf("%s is not a regular file", quotePath(f.Path))
	case a.UID == 0:
		vd.Allowed = f.Mode.Perm()&0o111 != 0
		if vd.Allowed {
			vd.Reason = describeFile(a, f) + ": uid 0 may execute a file with any x bit"
		} else {
			vd.Reason = describeFile(a, f) + ": no x bit at all, not even for uid 0"
		}
	default:
		bits, class := ModeClass(a, f)
		vd.Allowed = bits.Has(CeilingExec)
		vd.Reason = fmt.Sprintf("%s: the %s class has %s", describeFile(a, f), class, bits)
		if !vd.Allowed {
			vd.Reason += " (needs x)"
		}
	}
	return vd
}

// sharedLinux is the linux-permission layer for a shared space directory:
// read needs r and x (list and enter), write needs w and x (create and
// enter). uid 0 passes, as root passes directory checks.
func sharedLinux(a *Agent, f *FileFacts, perm Permission) Verdict {
	vd := Verdict{Layer: LayerLinux}
	want := CeilingRead | CeilingExec
	if perm == PermWrite {
		want = CeilingWrite | CeilingExec
	}
	switch {
	case f == nil:
		vd.Reason = "no such shared space"
	case !f.Mode.IsDir():
		vd.Reason = fmt.Sprintf("%s is not a directory", quotePath(f.Path))
	case a.UID == 0:
		vd.Allowed = true
		vd.Reason = describeFile(a, f) + ": uid 0 passes directory checks"
	default:
		bits, class := ModeClass(a, f)
		vd.Allowed = bits.Has(want)
		vd.Reason = fmt.Sprintf("%s: the %s class has %s", describeFile(a, f), class, bits)
		if !vd.Allowed {
			vd.Reason += fmt.Sprintf(" (needs %s)", want) + sharedGroupFix(a, f, class, want)
		}
	}
	return vd
}

// sharedGroupFix names the fix when the space's group would have what the
// agent needs but the agent is not in it: a space is shared through its
// group (ctx shared new makes it 2770). The group root's files have is no
// group to hand an agent: then the space needs a group of its own first.
func sharedGroupFix(a *Agent, f *FileFacts, class string, want Ceiling) string {
	if class != "other" || !Ceiling(uint32(f.Mode.Perm())>>3&7).Has(want) {
		return ""
	}
	if f.GID == 0 {
		return fmt.Sprintf("; fix: the space's group is gid 0 (root's): give it a group of its own (chgrp -R GROUP %s) and add that gid to agent/%s.d/groups", f.Path, a.Name)
	}
	return fmt.Sprintf("; fix: add gid %d, the space's group, to agent/%s.d/groups (ctx set agent/%s.d/groups %d), or chgrp -R the space to a group the agent has", f.GID, a.Name, a.Name, f.GID)
}

// visibility is the mount-visibility layer: the object's host path must be
// visible in the view; for execution not through a noexec mount, for
// writing not through a read-only one.
func visibility(v View, f *FileFacts, what string, exec, write bool) Verdict {
	vd := Verdict{Layer: LayerMount}
	if f == nil {
		vd.Reason = "no such " + what
		return vd
	}
	loc, ok := v.Locate(f.Path)
	if !ok {
		vd.Reason = fmt.Sprintf("%s is not visible in the agent's mount view", quotePath(f.Path))
		return vd
	}
	via := fmt.Sprintf("visible at %s through %s -> %s (%s,%s)", quotePath(loc.SandboxPath), quotePath(loc.Mount.Source), quotePath(loc.Mount.Target), loc.Mount.Mode(), loc.Mount.Options())
	switch {
	case exec && loc.Mount.NoExec:
		vd.Reason = via + ", which is noexec"
	case write && loc.Mount.ReadOnly:
		vd.Reason = via + ", which is read-only"
	default:
		vd.Allowed = true
		vd.Reason = via
	}
	return vd
}

// toolCeiling is the perm layer: the agent's ceiling must hold the bit that
// gates the tool; tools the ceiling does not govern pass.
func toolCeiling(a *Agent, tool string) Verdict {
	vd := Verdict{Layer: LayerPerm}
	bit, gated := CeilingFor(tool)
	switch {
	case !gated:
		vd.Allowed = true
		vd.Reason = "perm " + a.Ceiling.String() + " does not govern " + tool
	case a.Ceiling.Has(bit):
		vd.Allowed = true
		vd.Reason = fmt.Sprintf("perm %s holds %s", a.Ceiling, bit.letters())
	default:
		vd.Reason = fmt.Sprintf("perm %s lacks %s, which %s needs", a.Ceiling, bit.letters(), tool)
	}
	return vd
}

func agentPolicy(a *Agent, obj Object, perm Permission) Verdict {
	r := Rule{a.Subject, obj, perm}
	if a.Policy.Allows(a.Subject, obj, perm) {
		return Verdict{LayerAgentPolicy, true, fmt.Sprintf("agent/%s.d/policy has %q", a.Name, r)}
	}
	return Verdict{LayerAgentPolicy, false, fmt.Sprintf("no rule %q in agent/%s.d/policy", r, a.Name)}
}

func toolPolicy(a *Agent, obj Object, perm Permission, f Facts) Verdict {
	r := Rule{a.Subject, obj, perm}
	switch {
	case f.ToolPolicy == nil && f.ToolPolicyErr != nil:
		return Verdict{LayerToolPolicy, false, "tool policy unusable: " + f.ToolPolicyErr.Error()}
	case f.ToolPolicy == nil:
		return Verdict{LayerToolPolicy, false, "tool " + obj.Name + " has no policy"}
	case f.ToolPolicy.Allows(a.Subject, obj, perm):
		return Verdict{LayerToolPolicy, true, fmt.Sprintf("tool/%s.d/policy has %q", obj.Name, r)}
	}
	return Verdict{LayerToolPolicy, false, fmt.Sprintf("no rule %q in tool/%s.d/policy", r, obj.Name)}
}
