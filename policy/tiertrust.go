package policy

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"unicode"
)

// The tool-trust rule (DESIGN §16 rule 8): a tool is a candidate for an
// agent only when nothing any agent may change decides what runs. The tool
// file, its control directory (with everything in it) and every directory
// above them up to the tree root must be
//
//   - owned by root or by the tree's owner (the owner of the root
//     directory), so by no agent uid that is neither;
//   - writable by no one else: not group- or world-writable, except a
//     sticky directory (like the 1777 agent/ and home/ of a root bootstrap)
//     whose next component is itself owned by root or the tree owner, since
//     the sticky bit keeps others from replacing what they do not own;
//   - outside every directory some agent of the tree may write: a shared
//     space it is granted write on, its home, a read-write entry of its
//     mount control. With an unprivileged tree owner every agent runs as
//     the owner's uid, so ownership alone cannot tell.
//
// A tier (a CTX_PATH directory) that fails is skipped: its tools are not
// candidates at all, exactly as if absent, and lookup goes on with the next
// tier. A tool that fails on its own (its file or control directory) is
// skipped the same way. The walk is done by the caller (fsops gathers the
// facts); TierTrust decides over them.

// LayerTrust is the tool-trust rule as a refusing layer: tsh reports it
// when a tool it found is no longer trusted at execution time.
const LayerTrust Layer = "tool-trust"

// TrustWriter is a host directory an agent of the tree may write.
type TrustWriter struct {
	Dir   string // absolute host path
	Agent string // the agent that may write it
}

// TrustFacts is what the trust rule knows about a tree as a whole.
type TrustFacts struct {
	// Root is the tree root as the walks see it; reasons name paths
	// relative to it.
	Root string
	// TreeOwner owns Root.
	TreeOwner uint32
	// AgentUIDs maps the uid control of every agent of the tree to an agent
	// with that uid (for reasons).
	AgentUIDs map[uint32]string
	// Writers are the directories agents of the tree may write.
	Writers []TrustWriter
	// Also are owners trusted beside root and the tree owner: the caller
	// for an agent definition it made itself, the home's uid for an
	// agent's home (AgentDefTrust, HomeTrust).
	Also []uint32
}

// TierTrust decides whether target (a tier directory or a tool file) is
// trusted. components are the facts of the walk, top first: the top of the
// walk (the tree root), then each directory below it down to target, then
// for a tool its file and its control directory with every entry in it
// (each directory before its entries). A walk that stopped early (target
// does not exist yet) is judged on what exists and on target's path. It
// returns false and the first reason found: a writer first, then each
// component in order.
func TierTrust(target string, components []FileFacts, t TrustFacts) (bool, string) {
	for _, w := range t.Writers {
		if Within(target, w.Dir) || anyWithin(components, w.Dir) {
			return false, t.name(w.Dir) + " is writable by agent " + w.Agent
		}
	}
	_, reason := t.components(components)
	return reason == "", reason
}

// components applies the owner and mode parts of the rule to each
// component in order; it returns the index of the first that fails and
// why, or -1 and "".
func (t TrustFacts) components(components []FileFacts) (int, string) {
	for i := range components {
		if ok, reason := t.component(i, components); !ok {
			return i, reason
		}
	}
	return -1, ""
}

// component judges components[i] (its successor decides a sticky
// directory).
func (t TrustFacts) component(i int, components []FileFacts) (bool, string) {
	c := components[i]
	if c.Mode&fs.ModeSymlink != 0 && !hookEntry(c.Path) {
		// Consumers read a control directory's entries through
		// whatever a symlinked directory points at; its target is not
		// part of the walk. (A symlinked hook file is never run.)
		return false, t.name(c.Path) + " is a symlink (its target is not checked)"
	}
	if !t.trustedOwner(c.UID) {
		if agent, ok := t.AgentUIDs[c.UID]; ok {
			return false, fmt.Sprintf("%s is owned by uid %d of agent %s", t.name(c.Path), c.UID, agent)
		}
		return false, t.foreignOwner(c)
	}
	if c.Mode&fs.ModeSymlink != 0 {
		return true, "" // a symlink's own mode bits mean nothing
	}
	perm := c.Mode.Perm()
	if perm&0o022 == 0 {
		return true, ""
	}
	what := "group-writable"
	if perm&0o002 != 0 {
		what = "world-writable"
	}
	if c.Mode.IsDir() && c.Mode&fs.ModeSticky != 0 {
		// Sticky: others may add entries but not replace this walk's
		// next component, as long as they do not own it. The last
		// component's entries are the tools, walked on their own.
		if i+1 == len(components) || t.trustedOwner(components[i+1].UID) {
			return true, ""
		}
		return false, fmt.Sprintf("%s is %s and sticky, but %s is owned by uid %d", t.name(c.Path), what, t.name(components[i+1].Path), components[i+1].UID)
	}
	return false, fmt.Sprintf("%s is %s (mode %s)", t.name(c.Path), what, ModeString(c.Mode))
}

// trustedOwner: root, the tree owner, or one of Also.
func (t TrustFacts) trustedOwner(uid uint32) bool {
	return uid == 0 || uid == t.TreeOwner || slices.Contains(t.Also, uid)
}

// foreignOwner is the reason for a component owned by an untrusted uid.
func (t TrustFacts) foreignOwner(c FileFacts) string {
	others := ""
	for _, u := range t.Also {
		if u != 0 && u != t.TreeOwner {
			others += fmt.Sprintf(" nor uid %d", u)
		}
	}
	return fmt.Sprintf("%s is owned by uid %d, neither root nor the tree owner (uid %d)%s", t.name(c.Path), c.UID, t.TreeOwner, others)
}

// name renders a host path for a reason: relative to the root ("." for the
// root itself), absolute outside it, quoted when it holds spaces or
// unprintable bytes.
func (t TrustFacts) name(p string) string {
	n := p
	if t.Root != "" && Within(p, t.Root) {
		n = strings.TrimPrefix(strings.TrimPrefix(p, t.Root), "/")
		if n == "" {
			n = "."
		}
	}
	if strings.IndexFunc(n, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) }) >= 0 {
		return quote(n)
	}
	return n
}

func anyWithin(components []FileFacts, dir string) bool {
	for _, c := range components {
		if Within(c.Path, dir) {
			return true
		}
	}
	return false
}

// hookEntry reports whether p is an entry of a hooks/pre.d or hooks/post.d
// directory: the hook runner skips a symlinked hook, and doctor reports it.
func hookEntry(p string) bool {
	phase := path.Dir(p)
	b := path.Base(phase)
	return (b == "pre.d" || b == "post.d") && path.Base(path.Dir(phase)) == "hooks"
}

// ModeString renders permission bits with the special ones, as 04-digit
// octal (01777, 0775).
func ModeString(m fs.FileMode) string {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return fmt.Sprintf("%04o", v)
}

// TierSkipLine is the /mnt/proc/policy line (and the doctor detail) of a
// tier the trust rule skipped; tier is as the agent's path names it.
func TierSkipLine(tier, reason string) string {
	return "tier " + tier + " skipped untrusted: " + reason
}

// ToolSkipLine is the /mnt/proc/policy line of a tool skipped on its own;
// p is TIER/NAME as the agent's path names it.
func ToolSkipLine(p, reason string) string {
	return "tool " + p + " skipped untrusted: " + reason
}

// TierSkipped finds tier's TierSkipLine in a /mnt/proc/policy file: inside
// a sandbox the run host's verdicts, made with facts of the whole tree that
// the sandbox does not show, are the ones that count.
func TierSkipped(policyFile []byte, tier string) (reason string, skipped bool) {
	prefix := TierSkipLine(tier, "")
	for _, line := range strings.Split(string(policyFile), "\n") {
		if r, ok := strings.CutPrefix(line, prefix); ok {
			return r, true
		}
	}
	return "", false
}
