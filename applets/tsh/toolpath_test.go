package tsh

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func noIdentity(t *testing.T) {
	old := identityFile
	identityFile = filepath.Join(t.TempDir(), "no-identity")
	t.Cleanup(func() { identityFile = old })
}

func TestToolPathPrecedence(t *testing.T) {
	noIdentity(t)
	f := newFixture(t)
	root := f.root.Dir
	uid := filepath.Base(f.home)
	def := []string{root + "/tool", root + "/home/" + uid + "/tool"}
	shared := root + "/shared/p/tool"
	tshrc := filepath.Join(f.home, ".tshrc")
	writeRC := func(s string) {
		os.Remove(tshrc)
		if err := os.WriteFile(tshrc, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := func(env map[string]string) ([]string, error) {
		return ToolPath(&Env{Getenv: func(k string) string { return env[k] }}, f.root)
	}
	envPath := map[string]string{"CTX_PATH": "/env/a::rel:/env/b"}
	agent := map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1", "CTX_PATH": "/agent/tool"}
	agentNoPath := map[string]string{"CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1"}

	// No .tshrc: process CTX_PATH (empty and relative parts dropped), else
	// the default; the same inside an agent context.
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{nil, def},
		{envPath, []string{"/env/a", "/env/b"}},
		{agent, []string{"/agent/tool"}},
		{agentNoPath, def},
	} {
		if got, err := path(tc.env); err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("no .tshrc, env %v: %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}

	// With a .tshrc (written against /ctx, so re-rooted): it wins over the
	// process CTX_PATH standalone, and is never read in an agent context.
	writeRC("# mine first\nCTX_PATH=/ctx/home/" + uid + "/tool:/ctx/shared/p/tool:/ctx/tool\n")
	mine := []string{root + "/home/" + uid + "/tool", shared, root + "/tool"}
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{nil, mine},
		{envPath, mine},
		{agent, []string{"/agent/tool"}},
		{agentNoPath, def},
	} {
		if got, err := path(tc.env); err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf(".tshrc, env %v: %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}

	// An invalid .tshrc is an error naming file and line standalone, and
	// irrelevant in an agent context.
	writeRC("CTX_PATH=/ctx/tool\nCTX_PATH=/usr/bin\n")
	_, err := path(envPath)
	if err == nil || err.Error() != tshrc+": line 2: CTX_PATH given twice (first on line 1)" {
		t.Errorf("invalid .tshrc: %v", err)
	}
	writeRC("CTX_PATH=/usr/bin\n")
	_, err = path(nil)
	if err == nil || !strings.HasPrefix(err.Error(), tshrc+`: line 1: component 1: "/usr/bin" is not a tool tier`) {
		t.Errorf("invalid .tshrc: %v", err)
	}
	if got, err := path(agent); err != nil || !reflect.DeepEqual(got, []string{"/agent/tool"}) {
		t.Errorf("agent context read the .tshrc: %q, %v", got, err)
	}

	// A symlinked .tshrc is refused, not followed.
	os.Remove(tshrc)
	other := filepath.Join(root, "elsewhere")
	os.WriteFile(other, []byte("CTX_PATH=/ctx/tool\n"), 0o644)
	os.Symlink(other, tshrc)
	if _, err := path(envPath); err == nil || !strings.Contains(err.Error(), tshrc+": is a symlink") {
		t.Errorf("symlinked .tshrc: %v", err)
	}
	// So is an oversized one.
	os.Remove(tshrc)
	writeRC("#" + strings.Repeat("x", 64<<10) + "\nCTX_PATH=/ctx/tool\n")
	if _, err := path(nil); err == nil || !strings.Contains(err.Error(), "file too large") {
		t.Errorf("oversized .tshrc: %v", err)
	}
}

func TestToolPathCtxHome(t *testing.T) {
	noIdentity(t)
	f := newFixture(t)
	root := f.root.Dir
	home := filepath.Join(t.TempDir(), "me")
	os.MkdirAll(home, 0o755)
	os.WriteFile(filepath.Join(home, ".tshrc"), []byte("CTX_PATH="+home+"/tool:/ctx/tool\n"), 0o644)
	get := func(env map[string]string) ([]string, error) {
		return ToolPath(&Env{Getenv: func(k string) string { return env[k] }}, f.root)
	}
	got, err := get(map[string]string{"CTX_HOME": home})
	if want := []string{home + "/tool", root + "/tool"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("CTX_HOME: %q, %v; want %q", got, err, want)
	}
	if _, err := get(map[string]string{"CTX_HOME": "rel/home"}); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("relative CTX_HOME: %v", err)
	}
	// A symlinked CTX_HOME is not followed to find a .tshrc.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(home, link)
	if _, err := get(map[string]string{"CTX_HOME": link}); err == nil || !strings.Contains(err.Error(), "is a symlink") {
		t.Errorf("symlinked CTX_HOME: %v", err)
	}
	// A missing CTX_HOME just means no .tshrc.
	got, err = get(map[string]string{"CTX_HOME": filepath.Join(root, "nope"), "CTX_PATH": "/e"})
	if err != nil || !reflect.DeepEqual(got, []string{"/e"}) {
		t.Errorf("missing CTX_HOME: %q, %v", got, err)
	}
}

// The precedence as a user sees it: which tool `which` finds.
func TestToolPathPrecedenceEndToEnd(t *testing.T) {
	noIdentity(t)
	f := newFixture(t)
	f.script(t, f.sys, "fs.read", "")
	f.script(t, f.user, "fs.read", "")
	uid := filepath.Base(f.home)
	os.WriteFile(filepath.Join(f.home, ".tshrc"), []byte("CTX_PATH=/ctx/home/"+uid+"/tool:/ctx/tool\n"), 0o644)
	envSys := map[string]string{"CTX_PATH": f.sys}
	f.tsh(t, envSys, "", "which", "fs.read").check(t, 0, f.user+"/fs.read\n", "")
	f.tsh(t, map[string]string{"CTX_PATH": f.sys, "CTX_AGENT": "coder", "CTX_SESSION": "default", "CTX_RUN_ID": "r1"}, "", "which", "fs.read").check(t, 0, f.sys+"/fs.read\n", "")
	os.WriteFile(filepath.Join(f.home, ".tshrc"), []byte("export CTX_PATH=/ctx/tool\n"), 0o644)
	f.tsh(t, envSys, "", "which", "fs.read").check(t, 2, "",
		"tsh: "+f.home+"/.tshrc: line 1: \"export\" is shell syntax; .tshrc is data: write CTX_PATH=DIR:DIR\n")
}
