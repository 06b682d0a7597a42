package policy

import (
	"io/fs"
	"testing"
)

// TestSkillTrust: a shared skill bundle is shown only when no agent can
// change it: not in a directory an agent may write, no symlink, nothing
// owned by an agent's uid; a group-writable space (people keeping its
// skills) is fine, unlike a tool tier.
func TestSkillTrust(t *testing.T) {
	dir := func(p string, mode fs.FileMode, uid uint32) FileFacts {
		return FileFacts{Path: p, Mode: fs.ModeDir | mode, UID: uid}
	}
	file := func(p string, mode fs.FileMode, uid uint32) FileFacts {
		return FileFacts{Path: p, Mode: mode, UID: uid}
	}
	facts := TrustFacts{Root: "/srv/ctx", TreeOwner: 0, AgentUIDs: map[uint32]string{60100: "architect", 60101: "coder"}}
	writable := facts
	writable.Writers = []TrustWriter{{Dir: "/srv/ctx/shared/proj", Agent: "coder"}}
	const target = "/srv/ctx/shared/proj/skills/lint"
	chain := func(last ...FileFacts) []FileFacts {
		return append([]FileFacts{dir("/srv/ctx", 0o755, 0), dir("/srv/ctx/shared", 0o755, 0),
			dir("/srv/ctx/shared/proj", 0o2770, 0), dir("/srv/ctx/shared/proj/skills", 0o775, 0), dir(target, 0o755, 0)}, last...)
	}
	for _, tc := range []struct {
		name   string
		comps  []FileFacts
		facts  TrustFacts
		reason string
	}{
		{"root's bundle in a group space", chain(file(target+"/SKILL.md", 0o664, 0)), facts, ""},
		{"a space an agent may write", chain(file(target+"/SKILL.md", 0o644, 0)), writable, "shared/proj is writable by agent coder"},
		{"a file an agent made", chain(file(target+"/SKILL.md", 0o644, 60101)), facts, "shared/proj/skills/lint/SKILL.md is owned by uid 60101 of agent coder"},
		{"a symlink in the bundle", chain(file(target+"/SKILL.md", fs.ModeSymlink|0o777, 0)), facts, "shared/proj/skills/lint/SKILL.md is a symlink (its target is not checked)"},
		{"a stranger's file", chain(file(target+"/SKILL.md", 0o644, 1000)), facts, ""},
	} {
		ok, reason := SkillTrust(target, tc.comps, tc.facts)
		if ok != (tc.reason == "") || reason != tc.reason {
			t.Errorf("%s: got %v %q, want %q", tc.name, ok, reason, tc.reason)
		}
	}
}
