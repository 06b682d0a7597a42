package toolchain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctx/fsops"
	"ctx/policy"
)

// managersHome lays out, in a scratch home, volta's bin (node a link to
// volta-shim, a copy of a binary, neither link nor script) and its node
// under tools, and rustup's proxies in ~/.cargo/bin (cargo a copy of a
// binary, rustc a link to rustup beside it) with a toolchain in
// ~/.rustup, and the tokens cargo keeps in its home.
func managersHome(t *testing.T) string {
	t.Helper()
	h := t.TempDir()
	bin, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true to stand in for a shim binary")
	}
	for rel, body := range map[string][]byte{
		".volta/bin/volta-shim":                          bin,
		".volta/tools/image/node/20.0.0/bin/node":        []byte("#!/bin/sh\necho node\n"),
		".cargo/bin/cargo":                               bin,
		".cargo/bin/rustup":                              bin,
		".cargo/credentials.toml":                        []byte("token\n"),
		".rustup/toolchains/stable/bin/cargo":            []byte("#!/bin/sh\necho cargo\n"),
		"elsewhere/volta/bin/volta-shim":                 bin,
		"elsewhere/rustup/toolchains/stable/bin/rustc":   []byte("#!/bin/sh\n"),
		"elsewhere/volta/tools/image/node/1.0.0/bin/npm": []byte("#!/bin/sh\n"),
	} {
		p := filepath.Join(h, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("volta-shim", filepath.Join(h, ".volta/bin/node"))
	os.Symlink("rustup", filepath.Join(h, ".cargo/bin/rustc"))
	return h
}

// The table: a manager's directory of shims by its default place in the
// caller's home, or by its variable, the agent's before the caller's;
// volta needs its whole home, rustup's proxies their bin and rustup's
// home (never cargo's whole: its tokens), a home the host lacks left out.
func TestManagersShimTrees(t *testing.T) {
	h := managersHome(t)
	caller := map[string]string{}
	m := Managers{Home: h, Caller: func(k string) string { return caller[k] }}
	for _, tc := range []struct {
		agent       []string
		caller, dir string
		want        string
	}{
		{dir: "/.volta/bin", want: "~/.volta"},
		{dir: "/.cargo/bin", want: "~/.cargo/bin ~/.rustup"},
		{dir: "/.local/bin"},
		{dir: "/.volta"},
		{dir: "/elsewhere/volta/bin", agent: []string{"VOLTA_HOME=" + h + "/elsewhere/volta"}, want: "~/elsewhere/volta"},
		{dir: "/elsewhere/volta/bin", caller: "VOLTA_HOME=" + h + "/elsewhere/volta", want: "~/elsewhere/volta"},
		{dir: "/.volta/bin", agent: []string{"VOLTA_HOME=" + h + "/elsewhere/volta"}, want: "~/.volta"},
		// rustup's home: the agent's variable (what its proxies read
		// inside), before the caller's
		{dir: "/.cargo/bin", agent: []string{"RUSTUP_HOME=" + h + "/elsewhere/rustup"}, caller: "RUSTUP_HOME=" + h + "/.rustup", want: "~/.cargo/bin ~/elsewhere/rustup"},
		{dir: "/.cargo/bin", caller: "RUSTUP_HOME=" + h + "/elsewhere/rustup", want: "~/.cargo/bin ~/elsewhere/rustup"},
		{dir: "/.cargo/bin", agent: []string{"RUSTUP_HOME=" + h + "/missing"}, want: "~/.cargo/bin"},
		// a variable naming a home or a relative path is not honoured
		{dir: "/bin", agent: []string{"CARGO_HOME=" + h}},
		{dir: "/x/bin", agent: []string{"VOLTA_HOME=x"}},
	} {
		clear(caller)
		if k, v, ok := strings.Cut(tc.caller, "="); ok {
			caller[k] = v
		}
		m.Agent = tc.agent
		if got := cut(h, m.ShimTrees(h+tc.dir)); got != tc.want {
			t.Errorf("%s (agent %v, caller %s): %q, want %q", tc.dir, tc.agent, tc.caller, got, tc.want)
		}
	}
}

// A volta shim or a rustup proxy is neither a link nor a script: its
// check names the manager's trees, shown by the run host once the person
// mounted the shims' directory, and never cargo's home whole.
func TestCheckProgramManagers(t *testing.T) {
	h := managersHome(t)
	m := Managers{Home: h}
	for _, tc := range []struct {
		prog, dirs string
		mounts     []string
		mountable  bool
	}{
		{prog: "/.volta/bin/node", dirs: "~/.volta"},
		{prog: "/.volta/bin/node", mounts: []string{"/.volta/bin"}, dirs: "~/.volta", mountable: true},
		{prog: "/.cargo/bin/cargo", dirs: "~/.cargo/bin ~/.rustup"},
		{prog: "/.cargo/bin/rustc", dirs: "~/.cargo/bin ~/.rustup"},
		{prog: "/.cargo/bin/rustc", mounts: []string{"/.cargo/bin"}, dirs: "~/.rustup", mountable: true},
	} {
		var mounts []string
		for _, d := range tc.mounts {
			mounts = append(mounts, h+d)
		}
		c := CheckProgram(plan(mounts...), h+tc.prog, "/usr/bin:/bin", "", m)
		if c == nil {
			t.Errorf("%s %v: nothing to say", tc.prog, tc.mounts)
			continue
		}
		if got := cut(h, c.Dirs); got != tc.dirs {
			t.Errorf("%s %v: dirs %s, want %s", tc.prog, tc.mounts, got, tc.dirs)
		}
		if got := c.Mountable("/ctx-tree", h); got != tc.mountable {
			t.Errorf("%s %v: mountable %v, want %v", tc.prog, tc.mounts, got, tc.mountable)
		}
	}
	// a #! line that runs node by PATH, which finds volta's shim
	os.Mkdir(h+"/.local", 0o755)
	if err := os.WriteFile(h+"/.local/cli.js", []byte("#!/usr/bin/env node\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := CheckProgram(plan(h+"/.local", h+"/.volta/bin"), h+"/.local/cli.js", h+"/.volta/bin:/usr/bin:/bin", "", m)
	if c == nil || cut(h, c.Dirs) != "~/.volta" {
		t.Fatalf("node by PATH from volta: %+v", c)
	}
	if c := CheckProgram(plan(h+"/.volta"), h+"/.volta/bin/node", "/usr/bin:/bin", "", m); c != nil {
		t.Errorf("all shown: %+v", c)
	}
}

// The run host shows a manager's tree only where the person mounted its
// directory of shims and the tree is the person's alone: not writable by
// others anywhere in it, and no agent's writable place in it or around
// it; why not, in one line naming the path.
func TestManagerTreeGuard(t *testing.T) {
	h := managersHome(t)
	m := Managers{Home: h}
	g := Guard{UID: os.Geteuid(), Workspace: h + "/proj", Mounts: []policy.Mount{{Source: h + "/.volta/bin", Target: h + "/.volta/bin", ReadOnly: true}}}
	pl := plan(h + "/.volta/bin")
	c := CheckProgram(pl, h+"/.volta/bin/node", "/usr/bin:/bin", "", m)
	got, why := c.Mounts(g)
	if len(got) != 1 || got[0].Source != h+"/.volta" || !got[0].ReadOnly || len(why) != 0 {
		t.Fatalf("volta's tree: %+v %v", got, why)
	}
	// by PATH: the program is sh, PATH has the mounted shims' directory
	if got, _ := PathShimMounts(pl, h+"/.volta/bin:/usr/bin", m, g); len(got) != 1 || got[0].Source != h+"/.volta" || !got[0].ReadOnly {
		t.Fatalf("volta's tree by PATH: %+v", got)
	}
	if got, _ := PathShimMounts(plan(), h+"/.volta/bin:/usr/bin", m, g); len(got) != 0 {
		t.Fatalf("by PATH, its directory not mounted: %+v", got)
	}
	os.Chmod(h+"/.volta/tools/image", 0o777)
	if got, why := c.Mounts(g); len(got) != 0 || len(why) != 1 || !strings.Contains(why[0], h+"/.volta/tools/image is another user's, or writable by its group or others") {
		t.Errorf("a directory in the tree others may write: %+v %q", got, why)
	}
	if got, why := PathShimMounts(pl, h+"/.volta/bin", m, g); len(got) != 0 || len(why) != 1 {
		t.Errorf("by PATH, a directory in the tree others may write: %+v %q", got, why)
	}
	os.Chmod(h+"/.volta/tools/image", 0o755)
	os.Chmod(h+"/.volta/tools/image/node/20.0.0/bin/node", 0o757)
	if got, why := c.Mounts(g); len(got) != 0 || len(why) != 1 {
		t.Errorf("a file in the tree others may write: %+v %q", got, why)
	}
	os.Chmod(h+"/.volta/tools/image/node/20.0.0/bin/node", 0o755)
	g.Places = func() []string { return []string{h + "/.volta/tools"} }
	if got, why := c.Mounts(g); len(got) != 0 || len(why) != 1 || !strings.Contains(why[0], h+"/.volta/tools is where an agent writes or wrote") {
		t.Errorf("an agent writes in the tree: %+v %q", got, why)
	}
	// around it: its hops too, refused as any chain's are
	g.Places = func() []string { return []string{h} }
	if got, _ := c.Mounts(g); len(got) != 0 {
		t.Errorf("an agent writes around the tree: %+v", got)
	}
	if got, why := PathShimMounts(pl, h+"/.volta/bin", m, g); len(got) != 0 || len(why) != 1 || !strings.Contains(why[0], h+" is where an agent writes or wrote") {
		t.Errorf("by PATH, an agent writes around the tree: %+v %q", got, why)
	}
	g.Places = nil
	if got, why := c.Mounts(g); len(got) != 1 || len(why) != 0 {
		t.Errorf("the tree again the person's alone: %+v %q", got, why)
	}
	// a tree by a link: what it leads to is checked, whole
	os.Symlink(h+"/elsewhere/volta", h+"/linked")
	if why := g.TreeRefusal(h + "/linked"); why != "" {
		t.Errorf("a link to the person's tree: %s", why)
	}
	os.Chmod(h+"/elsewhere/volta/tools", 0o777)
	if why := g.TreeRefusal(h + "/linked"); !strings.Contains(why, h+"/elsewhere/volta/tools is another user's") {
		t.Errorf("a link to a tree others may write in: %q", why)
	}
	g.Places = func() []string { return []string{h + "/elsewhere"} }
	if why := g.TreeRefusal(h + "/linked"); !strings.Contains(why, h+"/elsewhere is where an agent writes") {
		t.Errorf("a link to a tree where an agent writes: %q", why)
	}
	if why := g.TreeRefusal(h + "/missing"); why == "" {
		t.Errorf("a missing tree passes")
	}
}

// The refusal says the program is the shim, or runs one by its #! line,
// and names the trees.
func TestRefusalManagers(t *testing.T) {
	h := managersHome(t)
	m := Managers{Home: h}
	root := fsops.Root{Dir: t.TempDir()}
	c := CheckProgram(plan(), h+"/.cargo/bin/cargo", "/usr/bin:/bin", "", m)
	if got := c.Refusal(root, "coder", "uid", "/usr/bin:/bin"); !strings.HasPrefix(got, h+"/.cargo/bin/cargo is outside what its sandbox shows (iso uid), and it is a shim: what it runs is chosen when it runs, in its trees "+h+"/.cargo/bin and "+h+"/.rustup, which the sandbox does not show either; fix: show "+h+"/.cargo/bin and "+h+"/.rustup read-only") {
		t.Errorf("cargo: %s", got)
	}
	os.Mkdir(h+"/.local", 0o755)
	os.WriteFile(h+"/.local/cli.js", []byte("#!/usr/bin/env node\n"), 0o755)
	c = CheckProgram(plan(h+"/.local", h+"/.volta/bin"), h+"/.local/cli.js", h+"/.volta/bin:/usr/bin:/bin", "", m)
	if got := c.Refusal(root, "coder", "uid", "/usr/bin:/bin"); !strings.HasPrefix(got, h+"/.local/cli.js runs a shim, which chooses what it runs when it runs, in its tree "+h+"/.volta, which its sandbox does not show (iso uid); fix: show "+h+"/.volta read-only") {
		t.Errorf("node by #!: %s", got)
	}
}
