package sandboxplan

import (
	"io/fs"
	"strings"
	"testing"

	"ctx/policy"
)

// TestLandlockHomeTop: an iso landlock home's top is writable only when
// the owner and mode of every held directory and skill keep the agent's
// uid out (Landlock could not), and then the plan withholds removing
// directories at the top while every other directory of the home is the
// agent's whole.
func TestLandlockHomeTop(t *testing.T) {
	a := mustAgent(t, "coder", coderControls())
	a.UID, a.GID = 60101, 60101
	home := "/ctx/home/60101/agent/coder"
	dir := func(name string, uid uint32, perm fs.FileMode) policy.FileFacts {
		return policy.FileFacts{Path: home + "/" + name, Mode: fs.ModeDir | perm, UID: uid}
	}
	held := []policy.FileFacts{dir("run", 0, 0o755), dir("session", 0, 0o700), dir("skills", 0, 0o755)}
	mine := []policy.FileFacts{dir("data", 60101, 0o700), dir(".config", 60101, 0o755),
		{Path: home + "/.npmrc", Mode: 0o644, UID: 60101}, {Path: home + "/.x", Mode: fs.ModeSymlink | 0o777, UID: 60101}}
	top, why := LandlockHomeTop(a, home, append(held, mine...), []policy.FileFacts{dir("skills/tips", 0, 0o755)}, true)
	if top == nil {
		t.Fatalf("refused: %s", why)
	}
	if got := strings.Join(top.Dirs, " "); got != strings.Join([]string{home + "/.config", home + "/cache", home + "/data",
		home + "/log", home + "/root", home + "/tmp"}, " ") {
		t.Errorf("dirs %s", got)
	}
	for _, c := range []struct {
		name            string
		entries, skills []policy.FileFacts
		complete        bool
		why             string
	}{
		{"a user's run", []policy.FileFacts{dir("run", 60101, 0o755), held[1], held[2]}, nil, true, "run is owned by the agent's uid 60101"},
		{"group-writable", []policy.FileFacts{held[0], {Path: home + "/session", Mode: fs.ModeDir | 0o770, GID: 60101}, held[2]}, nil, true,
			"session (mode 0770 owner 0:60101) is writable"},
		{"a skill the agent owns", held, []policy.FileFacts{dir("skills/tips", 60101, 0o755)}, true, "skills/tips is owned by the agent's uid"},
		{"world-writable skill", held, []policy.FileFacts{{Path: home + "/skills/x", Mode: 0o666}}, true, "skills/x (mode 0666 owner 0:0) is writable"},
		{"a symlink", []policy.FileFacts{held[0], held[1], {Path: home + "/skills", Mode: fs.ModeSymlink | 0o777}}, nil, true, "skills is a symlink"},
		{"missing", held[:2], nil, true, "skills does not exist"},
		{"a file", []policy.FileFacts{held[0], held[1], {Path: home + "/skills", Mode: 0o644}}, nil, true, "skills is not a directory"},
		{"too many skills", held, nil, false, "too many entries"},
	} {
		top, why := LandlockHomeTop(a, home, c.entries, c.skills, c.complete)
		if top != nil || !strings.Contains(why, c.why) {
			t.Errorf("%s: %v %q, want refused %q", c.name, top, why, c.why)
		}
	}
	ro := *a
	ro.Ceiling = policy.CeilingRead | policy.CeilingExec
	if top, _ := LandlockHomeTop(&ro, home, held, nil, true); top != nil {
		t.Error("perm without w: home top writable")
	}

	in := PlanInput{Agent: a, Iso: string(policy.IsoLandlock), RootDir: "/ctx", Workspace: "/w", AgentHome: home,
		Argv: []string{"true"}, HomeTop: top}
	p, err := BuildLandlockPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]AccessRule{}
	for _, r := range p.Access {
		rules[r.Path] = r
	}
	if r := rules[home]; !r.Write || !r.KeepDirs || r.Connect {
		t.Errorf("home rule %+v: want write, keeping its directories, no connect", r)
	}
	if r := rules[home+"/.config"]; !r.Write || r.KeepDirs {
		t.Errorf(".config rule %+v: want writable whole", r)
	}
	for _, d := range HomeHeldDirs {
		if _, ok := rules[home+"/"+d]; ok {
			t.Errorf("%s has a rule of its own", d)
		}
	}
}
