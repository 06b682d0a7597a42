package policy

import (
	"io/fs"
	"strings"
	"testing"
)

// TestTierTrust is the rule of DESIGN §16 rule 8 as a table: owner (root,
// the tree owner, an agent's uid, anyone else), group- and world-writable
// components, the sticky exception, symlinks, and directories an agent may
// write (a shared space granted write), each alone.
func TestTierTrust(t *testing.T) {
	const owner = 1000 // an unprivileged tree owner; root is trusted too
	dir := func(p string, mode fs.FileMode, uid uint32) FileFacts {
		return FileFacts{Path: p, Mode: fs.ModeDir | mode, UID: uid}
	}
	file := func(p string, mode fs.FileMode, uid uint32) FileFacts {
		return FileFacts{Path: p, Mode: mode, UID: uid}
	}
	facts := TrustFacts{Root: "/srv/ctx", TreeOwner: owner, AgentUIDs: map[uint32]string{60100: "architect", 60101: "coder", owner: "solo"}}
	writable := facts
	writable.Writers = []TrustWriter{{Dir: "/srv/ctx/shared/proj", Agent: "coder"}}
	root := dir("/srv/ctx", 0o755, 0)

	for _, tc := range []struct {
		name   string
		target string
		comps  []FileFacts
		facts  TrustFacts
		reason string // "" when trusted
	}{
		{"system tier, root-owned", "/srv/ctx/tool",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 0)}, facts, ""},
		{"tree owner's tier", "/srv/ctx/tool",
			[]FileFacts{dir("/srv/ctx", 0o755, owner), dir("/srv/ctx/tool", 0o755, owner)}, facts, ""},
		{"tool file and control dir", "/srv/ctx/tool/fs.read",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 0), file("/srv/ctx/tool/fs.read", 0o755, 0),
				dir("/srv/ctx/tool/fs.read.d", 0o755, 0), file("/srv/ctx/tool/fs.read.d/policy", 0o644, 0)}, facts, ""},
		{"agent-owned tier", "/srv/ctx/home/0/tool",
			[]FileFacts{root, dir("/srv/ctx/home", 0o755, 0), dir("/srv/ctx/home/0", 0o755, 0), dir("/srv/ctx/home/0/tool", 0o755, 60101)},
			facts, "home/0/tool is owned by uid 60101 of agent coder"},
		{"agent-owned tool file", "/srv/ctx/tool/x",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 0), file("/srv/ctx/tool/x", 0o755, 60100)},
			facts, "tool/x is owned by uid 60100 of agent architect"},
		{"agent-owned policy in the control dir", "/srv/ctx/tool/x",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 0), file("/srv/ctx/tool/x", 0o755, 0),
				dir("/srv/ctx/tool/x.d", 0o755, 0), file("/srv/ctx/tool/x.d/policy", 0o644, 60101)},
			facts, "tool/x.d/policy is owned by uid 60101 of agent coder"},
		{"stranger-owned", "/srv/ctx/tool",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 4242)},
			facts, "tool is owned by uid 4242, neither root nor the tree owner (uid 1000)"},
		{"group-writable", "/srv/ctx/tool",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o775, 0)},
			facts, "tool is group-writable (mode 0775)"},
		{"world-writable file", "/srv/ctx/tool/x",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 0), file("/srv/ctx/tool/x", 0o757, 0)},
			facts, "tool/x is world-writable (mode 0757)"},
		{"world-writable root", "/srv/ctx/tool",
			[]FileFacts{dir("/srv/ctx", 0o777, 0), dir("/srv/ctx/tool", 0o755, 0)},
			facts, ". is world-writable (mode 0777)"},
		{"sticky parent, next trusted", "/srv/ctx/home/0/tool",
			[]FileFacts{root, dir("/srv/ctx/home", 0o777|fs.ModeSticky, 0), dir("/srv/ctx/home/0", 0o700, 0), dir("/srv/ctx/home/0/tool", 0o755, 0)},
			facts, ""},
		{"sticky parent, next agent-owned", "/srv/ctx/home/60101/tool",
			[]FileFacts{root, dir("/srv/ctx/home", 0o777|fs.ModeSticky, 0), dir("/srv/ctx/home/60101", 0o700, 60101), dir("/srv/ctx/home/60101/tool", 0o755, 0)},
			facts, "home is world-writable and sticky, but home/60101 is owned by uid 60101"},
		{"sticky tier itself: its tools are walked on their own", "/srv/ctx/tmp",
			[]FileFacts{root, dir("/srv/ctx/tmp", 0o777|fs.ModeSticky, 0)}, facts, ""},
		{"sticky file is no exception", "/srv/ctx/tool/x",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 0), file("/srv/ctx/tool/x", 0o777|fs.ModeSticky, 0)},
			facts, "tool/x is world-writable (mode 1777)"},
		{"symlinked component", "/srv/ctx/tool",
			[]FileFacts{root, {Path: "/srv/ctx/tool", Mode: fs.ModeSymlink | 0o777, UID: 0}},
			facts, "tool is a symlink (its target is not checked)"},
		{"symlinked hook file is never run", "/srv/ctx/tool/x",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 0), file("/srv/ctx/tool/x", 0o755, 0),
				dir("/srv/ctx/tool/x.d", 0o755, 0), dir("/srv/ctx/tool/x.d/hooks", 0o755, 0), dir("/srv/ctx/tool/x.d/hooks/pre.d", 0o755, 0),
				{Path: "/srv/ctx/tool/x.d/hooks/pre.d/00-x", Mode: fs.ModeSymlink | 0o777, UID: 0}},
			facts, ""},
		{"symlinked hooks directory", "/srv/ctx/tool/x",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 0), file("/srv/ctx/tool/x", 0o755, 0),
				dir("/srv/ctx/tool/x.d", 0o755, 0), {Path: "/srv/ctx/tool/x.d/hooks", Mode: fs.ModeSymlink | 0o777, UID: 0}},
			facts, "tool/x.d/hooks is a symlink (its target is not checked)"},
		{"shared space writable by an agent", "/srv/ctx/shared/proj/tool",
			[]FileFacts{root, dir("/srv/ctx/shared", 0o755, 0), dir("/srv/ctx/shared/proj", 0o755, 0), dir("/srv/ctx/shared/proj/tool", 0o755, 0)},
			writable, "shared/proj is writable by agent coder"},
		{"writable space: its tool tier not there yet", "/srv/ctx/shared/proj/tool",
			[]FileFacts{root, dir("/srv/ctx/shared", 0o755, 0), dir("/srv/ctx/shared/proj", 0o755, 0)},
			writable, "shared/proj is writable by agent coder"},
		{"writer below the tier covers a control dir", "/srv/ctx/tool/x",
			[]FileFacts{root, dir("/srv/ctx/tool", 0o755, 0), file("/srv/ctx/tool/x", 0o755, 0), dir("/srv/ctx/tool/x.d", 0o755, 0)},
			TrustFacts{Root: "/srv/ctx", Writers: []TrustWriter{{Dir: "/srv/ctx/tool/x.d", Agent: "coder"}}},
			"tool/x.d is writable by agent coder"},
		{"another space's writer", "/srv/ctx/shared/lib/tool",
			[]FileFacts{root, dir("/srv/ctx/shared", 0o755, 0), dir("/srv/ctx/shared/lib", 0o755, 0), dir("/srv/ctx/shared/lib/tool", 0o755, 0)},
			writable, ""},
		{"prefix is not containment", "/srv/ctx/shared/project/tool",
			[]FileFacts{root, dir("/srv/ctx/shared", 0o755, 0), dir("/srv/ctx/shared/project", 0o755, 0), dir("/srv/ctx/shared/project/tool", 0o755, 0)},
			writable, ""},
		{"the writer is named before the mode", "/srv/ctx/shared/proj/tool",
			[]FileFacts{root, dir("/srv/ctx/shared", 0o755, 0), dir("/srv/ctx/shared/proj", 0o2770, 0), dir("/srv/ctx/shared/proj/tool", 0o2770, 60101)},
			writable, "shared/proj is writable by agent coder"},
		{"outside the tree: named absolutely", "/opt/tools",
			[]FileFacts{dir("/", 0o755, 0), dir("/opt", 0o755, 0), dir("/opt/tools", 0o775, 0)},
			facts, "/opt/tools is group-writable (mode 0775)"},
		{"unprintable names are quoted", "/srv/ctx/a b",
			[]FileFacts{root, dir("/srv/ctx/a b", 0o777, 0)},
			facts, `"a b" is world-writable (mode 0777)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := TierTrust(tc.target, tc.comps, tc.facts)
			if ok != (tc.reason == "") || reason != tc.reason {
				t.Errorf("TierTrust = %v, %q; want %v, %q", ok, reason, tc.reason == "", tc.reason)
			}
		})
	}
}

func TestTierSkipLines(t *testing.T) {
	line := TierSkipLine("/ctx/shared/proj/tool", "shared/proj is writable by agent coder")
	if line != "tier /ctx/shared/proj/tool skipped untrusted: shared/proj is writable by agent coder" {
		t.Fatalf("TierSkipLine = %q", line)
	}
	file := []byte("tool:fs.read execute granted\n" + line + "\n" + ToolSkipLine("/ctx/tool/x", "why") + "\n")
	if r, ok := TierSkipped(file, "/ctx/shared/proj/tool"); !ok || r != "shared/proj is writable by agent coder" {
		t.Errorf("TierSkipped = %q, %v", r, ok)
	}
	for _, tier := range []string{"/ctx/shared/proj", "/ctx/tool", "/ctx/shared/proj/tool/x"} {
		if _, ok := TierSkipped(file, tier); ok {
			t.Errorf("TierSkipped(%s) found a verdict it does not have", tier)
		}
	}
	if !strings.HasPrefix(ToolSkipLine("/ctx/tool/x", "why"), "tool /ctx/tool/x skipped untrusted: ") {
		t.Error("ToolSkipLine")
	}
}
