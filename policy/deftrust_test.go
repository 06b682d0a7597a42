package policy

import (
	"io/fs"
	"testing"
)

// TestDefAndHomeTrust: a definition or a home another uid made is named
// (the component itself, not the sticky directory above it); the caller's
// own definition and the home's own uid pass; a control writable by
// others fails even when root owns it.
func TestDefAndHomeTrust(t *testing.T) {
	dir := func(p string, mode fs.FileMode, uid uint32) FileFacts {
		return FileFacts{Path: p, Mode: fs.ModeDir | mode, UID: uid}
	}
	file := func(p string, mode fs.FileMode, uid uint32) FileFacts {
		return FileFacts{Path: p, Mode: mode, UID: uid}
	}
	facts := TrustFacts{Root: "/ctx", TreeOwner: 0}
	root := dir("/ctx", 0o755, 0)
	sticky := dir("/ctx/agent", fs.ModeSticky|0o777, 0)
	def := func(uid uint32, ctlMode fs.FileMode) []FileFacts {
		return []FileFacts{root, sticky, file("/ctx/agent/a", 0o755, uid), dir("/ctx/agent/a.d", 0o755, uid), file("/ctx/agent/a.d/mount", ctlMode, uid)}
	}
	for _, tc := range []struct {
		name   string
		comps  []FileFacts
		caller uint32
		at     int
		reason string
	}{
		{"root's, root starts", def(0, 0o644), 0, -1, ""},
		{"another uid's, root starts", def(65534, 0o644), 0, 2, "agent/a is owned by uid 65534, neither root nor the tree owner (uid 0)"},
		{"another uid's, a third starts", def(65534, 0o644), 1000, 2, "agent/a is owned by uid 65534, neither root nor the tree owner (uid 0) nor uid 1000"},
		{"the caller's own", def(65534, 0o644), 65534, -1, ""},
		{"root's, a control world-writable", def(0, 0o666), 0, 4, "agent/a.d/mount is world-writable (mode 0666)"},
	} {
		at, reason := AgentDefTrust(tc.comps, facts, tc.caller)
		if at != tc.at || reason != tc.reason {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, at, reason, tc.at, tc.reason)
		}
	}
	homes := dir("/ctx/home", fs.ModeSticky|0o777, 0)
	home := func(uid uint32, mode fs.FileMode) []FileFacts {
		return []FileFacts{root, homes, dir("/ctx/home/60100", mode, uid), dir("/ctx/home/60100/agent", 0o711, uid)}
	}
	for _, tc := range []struct {
		name   string
		comps  []FileFacts
		at     int
		reason string
	}{
		{"root made it", home(0, 0o711), -1, ""},
		{"the uid's own", home(60100, 0o700), -1, ""},
		{"another user made it", home(65534, 0o777), 2, "home/60100 is owned by uid 65534, neither root nor the tree owner (uid 0) nor uid 60100"},
		{"root's, but world-writable", home(0, 0o777), 2, "home/60100 is world-writable (mode 0777)"},
	} {
		at, reason := HomeTrust(tc.comps, facts, 60100)
		if at != tc.at || reason != tc.reason {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, at, reason, tc.at, tc.reason)
		}
	}
}
