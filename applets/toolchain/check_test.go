package toolchain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy/sandboxplan"
)

// home lays out, in a scratch home, nvm's npm (a link into lib) and a
// pipx tool (a link into its venv, whose #! line names the venv's python,
// a link into a pyenv version), each interpreter a script of /bin/sh.
func home(t *testing.T) string {
	t.Helper()
	h := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(h, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(body, "@H@", h)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, rel string) {
		if err := os.Symlink(strings.ReplaceAll(target, "@H@", h), filepath.Join(h, rel)); err != nil {
			t.Fatal(err)
		}
	}
	write("nvm/v22/bin/node", "#!/bin/sh\n")
	write("nvm/v22/lib/node_modules/npm/bin/npm-cli.js", "#!/bin/sh\n")
	link("../lib/node_modules/npm/bin/npm-cli.js", "nvm/v22/bin/npm")
	write("pyenv/versions/3.12/bin/python3.12", "#!/bin/sh\n")
	write(".local/share/pipx/venvs/black/bin/black", "#!@H@/.local/share/pipx/venvs/black/bin/python\n")
	link("@H@/pyenv/versions/3.12/bin/python3.12", ".local/share/pipx/venvs/black/bin/python")
	os.MkdirAll(filepath.Join(h, ".local/bin"), 0o755)
	link("@H@/.local/share/pipx/venvs/black/bin/black", ".local/bin/black")
	write("pyenv/shims/python", "#!/bin/sh\n")
	return h
}

// plan is a sandbox that shows the host's system directories, and the
// host directories mounts at their own paths.
func plan(mounts ...string) *sandboxplan.Plan {
	p := &sandboxplan.Plan{Iso: "uid", Cwd: "/workspace"}
	for _, d := range append([]string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"}, mounts...) {
		p.Ops = append(p.Ops, sandboxplan.Op{Kind: sandboxplan.OpBind, Source: d, Target: d})
	}
	return p
}

func cut(h string, dirs []string) string {
	return strings.ReplaceAll(strings.Join(dirs, " "), h, "~")
}

func TestCheckProgram(t *testing.T) {
	h := home(t)
	for _, tc := range []struct {
		prog, dirs string
		mounts     []string
		mountable  bool
	}{
		// nvm: bin's link leads into lib: the version's tree, one line
		{prog: "/nvm/v22/bin/npm", dirs: "~/nvm/v22"},
		// bin mounted by the person: the package alone, by the run host
		{prog: "/nvm/v22/bin/npm", mounts: []string{"/nvm/v22/bin"}, dirs: "~/nvm/v22/lib/node_modules/npm", mountable: true},
		// pipx: ~/.local/bin, never ~/.local; the venv; the python
		{prog: "/.local/bin/black", dirs: "~/.local/bin ~/.local/share/pipx/venvs/black ~/pyenv/versions/3.12"},
		{prog: "/.local/bin/black", mounts: []string{"/.local/bin"}, dirs: "~/.local/share/pipx/venvs/black ~/pyenv/versions/3.12", mountable: true},
		// a shim: its tree, never by the run host
		{prog: "/pyenv/shims/python", mounts: []string{"/pyenv/shims"}, dirs: "~/pyenv"},
	} {
		var mounts []string
		for _, m := range tc.mounts {
			mounts = append(mounts, h+m)
		}
		c := CheckProgram(plan(mounts...), h+tc.prog, "/usr/bin:/bin", "", Managers{Home: h})
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
	// all of it shown: nothing to say
	if c := CheckProgram(plan(h+"/nvm"), h+"/nvm/v22/bin/npm", "/usr/bin:/bin", "", Managers{Home: h}); c != nil {
		t.Errorf("all shown: %+v", c)
	}
	// a chain that leads into the ctx tree is never mounted by the run host
	c := CheckProgram(plan(h+"/.local/bin"), h+"/.local/bin/black", "/usr/bin:/bin", "", Managers{Home: h})
	if c.Mountable(h+"/pyenv", h) {
		t.Errorf("a chain into the tree is mountable")
	}
}

// The fix for several directories sets a line each, whether the mount
// control has lines or not, and --mount each for one start.
func TestMountLinesFix(t *testing.T) {
	root := fsops.Root{Dir: t.TempDir()}
	got := MountLinesFix(root, "coder", []string{"/a b", "/c"})
	for _, want := range []string{`show /a b and /c read-only with lines of agent/coder.d/mount: `,
		`"$(printf '%s\t%s\tro\trbind,nosuid,nodev\n' '/a b' '/a b' /c /c)"`,
		`(or, for one start, --mount '/a b' '/a b' ro --mount /c /c ro)`} {
		if !strings.Contains(got, want) {
			t.Errorf("fix\n %s\nlacks\n %s", got, want)
		}
	}
	got = MountLineFix(root, "coder", "/a")
	if !strings.Contains(got, `with a line of agent/coder.d/mount: `) || !strings.Contains(got, `"$(printf '%s\t%s\tro\trbind,nosuid,nodev' /a /a)"`) {
		t.Errorf("one directory: %s", got)
	}
}

// A hop in a directory too broad to show whole (a link at /, as /lib64
// is where a sandbox lacks it) gets no directory, and takes none from
// the others.
func TestChainDirsTooBroad(t *testing.T) {
	h := "/home/u"
	hops := []proc.Hop{{Path: "/lib64", Kind: proc.HopLink}, {Path: "/opt/py/bin/python3", Kind: proc.HopFile}}
	if got := strings.Join(chainDirs("/x/prog", hops, nil, h), " "); got != "/opt/py" {
		t.Errorf("dirs %q, want /opt/py", got)
	}
}

// The run host never shows by itself a directory of the kernel's or the
// services' (their sockets), the ctx tree's, or one too broad.
func TestMountableRefuses(t *testing.T) {
	h := t.TempDir()
	for _, d := range []string{"/run", "/dev", "/proc/self", h + "/tree/bin", "/", "/home/u/.local"} {
		c := &Check{World: h + "/bin/x", Dirs: []string{d}}
		if c.Mountable(h+"/tree", "/home/u") {
			t.Errorf("%s is mountable", d)
		}
	}
	if c := (&Check{World: h + "/bin/x", Dirs: []string{h}}); !c.Mountable("/ctx-tree", "/home/u") {
		t.Errorf("%s is not mountable", h)
	}
}
