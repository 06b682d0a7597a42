package object

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

type fixture struct {
	t      *testing.T
	source string
	work   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{t: t, source: filepath.Join(base, "ctx"), work: filepath.Join(base, "work")}
	for _, d := range []string{"tool", "agent", "home/" + strconv.Itoa(os.Geteuid()) + "/tool", "home/" + strconv.Itoa(os.Geteuid()) + "/agent", "../work/bin"} {
		if err := os.MkdirAll(filepath.Join(f.source, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// artifact writes an executable into work/bin and returns its digest.
func (f *fixture) artifact(name, content string) string {
	p := filepath.Join(f.work, "bin", name)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		f.t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// manifest writes a tool manifest for name with a relative executable path.
func (f *fixture) manifest(name string, edit func(m map[string]any)) string {
	sum := f.artifact(name, "#!/bin/sh\necho "+name+"\n")
	m := toolManifest()
	m["name"] = name
	m["executable"] = map[string]any{"path": "bin/" + name, "sha256": sum}
	if edit != nil {
		edit(m)
	}
	p := filepath.Join(f.work, name+".manifest.json")
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) target(tier string) Target {
	return Target{Source: f.source, Tier: tier, UID: os.Geteuid()}
}

// snapshot records every entry under dir: type, mode, content or link
// target. Comparing two snapshots proves a tree byte-for-byte unchanged.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		entry := fmt.Sprintf("%v ino=%d", info.Mode(), st.Ino)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			entry += " -> " + l
		case info.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			entry += " " + string(b)
		}
		out[strings.TrimPrefix(p, dir)] = entry
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed: %q -> %q", k, v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared: %q", k, v)
		}
	}
}

func TestInstallInspectUninstall(t *testing.T) {
	f := newFixture(t)
	mp := f.manifest("example.echo", func(m map[string]any) {
		m["controls"].(map[string]any)["policy"] = "allow coder_t tool:example.echo execute"
	})
	if _, err := Check(mp); err != nil {
		t.Fatal(err)
	}
	got, err := Install(mp, f.target("user"))
	if err != nil {
		t.Fatal(err)
	}
	dir := f.target("user").ClassDir("tool")
	want := map[string]string{
		"name":        "example.echo\n",
		"description": "Echo text.\n",
		"schema":      "{\"type\":\"object\"}\n",
		"cap":         "text\n",
		"policy":      "allow coder_t tool:example.echo execute\n",
		"status":      "idle\n",
		"log":         "",
	}
	for k, v := range want {
		b, err := os.ReadFile(filepath.Join(dir, "example.echo.d", k))
		if err != nil || string(b) != v {
			t.Errorf("control %s = %q, %v; want %q", k, b, err, v)
		}
	}
	for _, d := range []string{"hooks/pre.d", "hooks/post.d"} {
		if st, err := os.Stat(filepath.Join(dir, "example.echo.d", d)); err != nil || !st.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "example.echo"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("executable: %v %v", st, err)
	}
	rst, err := os.Stat(filepath.Join(dir, "example.echo.d", ReceiptName))
	if err != nil || rst.Mode().Perm() != 0o444 {
		t.Fatalf("receipt: %v %v", rst, err)
	}
	// No stage residue.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("class dir holds %v", entries)
	}

	ins, err := Inspect(f.target("user"), "tool", "example.echo")
	if err != nil {
		t.Fatal(err)
	}
	if ins.Describe() != got.Describe() || !strings.HasPrefix(ins.Describe(), "tool/example.echo tier=user schema=cortexfs.object/v2 version=1.0.0 requires-cortexfs=>=0.1.7, <0.2.0 sha256=") {
		t.Fatalf("inspect %q, install %q", ins.Describe(), got.Describe())
	}
	// Wrong tier: the receipt is the authority.
	if _, err := Inspect(f.target("system"), "tool", "example.echo"); KindOf(err) != Unavailable {
		t.Fatalf("system tier inspect: %v", err)
	}

	// Dry run changes nothing.
	before := snapshot(t, f.source)
	if _, err := Uninstall(f.target("user"), "tool", "example.echo", false); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, before, snapshot(t, f.source))
	if _, err := Uninstall(f.target("user"), "tool", "example.echo", true); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("after uninstall: %v", entries)
	}
	if _, err := Inspect(f.target("user"), "tool", "example.echo"); KindOf(err) != Unavailable || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("inspect after uninstall: %v", err)
	}
}

func TestInstallAgent(t *testing.T) {
	f := newFixture(t)
	sum := f.artifact("agent-bin", "#!/bin/sh\n")
	m := agentManifest()
	delete(m["controls"].(map[string]any), "window")
	delete(m["controls"].(map[string]any), "perm")
	m["executable"] = map[string]any{"path": filepath.Join(f.work, "bin", "agent-bin"), "sha256": strings.ToUpper(sum)}
	b, _ := json.Marshal(m)
	mp := filepath.Join(f.work, "agent.json")
	os.WriteFile(mp, b, 0o644)

	before := snapshot(t, f.source)
	if _, err := Install(mp, f.target("user")); KindOf(err) != Invalid || !strings.Contains(err.Error(), "--tier system") {
		t.Fatalf("user tier agent: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, f.source))
	got, err := Install(mp, f.target("system"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.Describe(), "agent/reviewer tier=system schema=cortexfs.object/v1 sha256="+sum) {
		t.Fatalf("describe %q", got.Describe())
	}
	for k, v := range map[string]string{"window": "auto\n", "perm": "rwx\n", "pid": "", "status": "idle\n", "meta.json": "{\"description\":\"x\"}\n"} {
		b, err := os.ReadFile(filepath.Join(f.source, "agent", "reviewer.d", k))
		if err != nil || string(b) != v {
			t.Errorf("%s = %q %v, want %q", k, b, err, v)
		}
	}
	if _, err := os.Stat(filepath.Join(f.source, "agent", "reviewer.d", "name")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("agent got a name file: %v", err)
	}
}

// An existing object, or anything holding its name, stays byte-for-byte
// unchanged and the install is refused as unavailable.
func TestInstallConflicts(t *testing.T) {
	for _, occupant := range []string{"exe", "ctl", "symlink", "dangling"} {
		t.Run(occupant, func(t *testing.T) {
			f := newFixture(t)
			mp := f.manifest("dup", nil)
			dir := f.target("system").ClassDir("tool")
			switch occupant {
			case "exe":
				os.WriteFile(filepath.Join(dir, "dup"), []byte("old bytes"), 0o755)
			case "ctl":
				os.Mkdir(filepath.Join(dir, "dup.d"), 0o755)
				os.WriteFile(filepath.Join(dir, "dup.d", "policy"), []byte("allow a_t tool:dup execute\n"), 0o644)
			case "symlink":
				os.Symlink("/bin/true", filepath.Join(dir, "dup"))
			case "dangling":
				os.Symlink("nowhere", filepath.Join(dir, "dup.d"))
			}
			before := snapshot(t, f.source)
			_, err := Install(mp, f.target("system"))
			if KindOf(err) != Unavailable || !strings.Contains(err.Error(), "already exists") {
				t.Fatalf("install over %s: %v", occupant, err)
			}
			sameSnapshot(t, before, snapshot(t, f.source))
		})
	}
}

func TestInstallReinstallRefused(t *testing.T) {
	f := newFixture(t)
	mp := f.manifest("once", nil)
	if _, err := Install(mp, f.target("system")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, f.source)
	if _, err := Install(mp, f.target("system")); KindOf(err) != Unavailable {
		t.Fatalf("second install: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, f.source))
}

func TestInstallInvalidArtifact(t *testing.T) {
	tests := map[string]func(f *fixture, m map[string]any){
		"digest": func(f *fixture, m map[string]any) { m["executable"].(map[string]any)["sha256"] = zeroSum },
		"missing": func(f *fixture, m map[string]any) {
			m["executable"].(map[string]any)["path"] = "bin/nothing"
		},
		"not executable": func(f *fixture, m map[string]any) { os.Chmod(filepath.Join(f.work, "bin", "x"), 0o644) },
		"symlink": func(f *fixture, m map[string]any) {
			os.Symlink("x", filepath.Join(f.work, "bin", "link"))
			m["executable"].(map[string]any)["path"] = "bin/link"
		},
		"symlinked parent": func(f *fixture, m map[string]any) {
			os.Symlink("bin", filepath.Join(f.work, "binlink"))
			m["executable"].(map[string]any)["path"] = "binlink/x"
		},
		"directory": func(f *fixture, m map[string]any) { m["executable"].(map[string]any)["path"] = "bin" },
		"fifo": func(f *fixture, m map[string]any) {
			syscall.Mkfifo(filepath.Join(f.work, "bin", "fifo"), 0o755)
			m["executable"].(map[string]any)["path"] = "bin/fifo"
		},
	}
	for name, edit := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			mp := f.manifest("x", func(m map[string]any) { edit(f, m) })
			before := snapshot(t, f.source)
			if _, err := Check(mp); KindOf(err) != Invalid {
				t.Fatalf("check: %v", err)
			}
			if _, err := Install(mp, f.target("system")); KindOf(err) != Invalid {
				t.Fatalf("install: %v", err)
			}
			sameSnapshot(t, before, snapshot(t, f.source))
		})
	}
}

func TestInstallSymlinkedClassDir(t *testing.T) {
	f := newFixture(t)
	mp := f.manifest("x", nil)
	os.Remove(filepath.Join(f.source, "tool"))
	os.Mkdir(filepath.Join(f.work, "elsewhere"), 0o755)
	os.Symlink(filepath.Join(f.work, "elsewhere"), filepath.Join(f.source, "tool"))
	if _, err := Install(mp, f.target("system")); KindOf(err) != Unavailable || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("install: %v", err)
	}
	if e, _ := os.ReadDir(filepath.Join(f.work, "elsewhere")); len(e) != 0 {
		t.Fatalf("wrote through the symlink: %v", e)
	}
}

// Failure injection at each publish step: nothing stays published, the
// stage is gone, and a file that took the name meanwhile is untouched.
func TestInstallPublishRollback(t *testing.T) {
	for _, tc := range []struct {
		step    string
		foreign bool // a foreign file takes the executable's name at that step
	}{{"control", false}, {"executable", false}, {"executable", true}} {
		t.Run(fmt.Sprintf("%s-foreign=%v", tc.step, tc.foreign), func(t *testing.T) {
			f := newFixture(t)
			mp := f.manifest("racy", nil)
			dir := f.target("system").ClassDir("tool")
			publishFault = func(step string) error {
				if step != tc.step {
					return nil
				}
				if tc.foreign {
					// Another writer creates the executable's name now:
					// the real rename then fails with EEXIST.
					return os.WriteFile(filepath.Join(dir, "racy"), []byte("foreign"), 0o700)
				}
				return errors.New("injected failure")
			}
			defer func() { publishFault = nil }()
			_, err := Install(mp, f.target("system"))
			if KindOf(err) != Unavailable {
				t.Fatalf("install: %v", err)
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			want := "[]"
			if tc.foreign {
				want = "[racy]"
				if b, _ := os.ReadFile(filepath.Join(dir, "racy")); string(b) != "foreign" {
					t.Fatalf("foreign file changed: %q", b)
				}
				if !strings.Contains(err.Error(), "appeared") {
					t.Fatalf("error %v", err)
				}
			}
			if fmt.Sprint(names) != want {
				t.Fatalf("class dir after failed publish: %v, want %s", names, want)
			}
		})
	}
}

func TestInspectRefusesTampering(t *testing.T) {
	tests := map[string]func(dir string){
		"no receipt":    func(dir string) { os.Remove(filepath.Join(dir, "t.d", ReceiptName)) },
		"bytes changed": func(dir string) { os.WriteFile(filepath.Join(dir, "t"), []byte("evil"), 0o755) },
		"replaced inode": func(dir string) {
			os.Rename(filepath.Join(dir, "t"), filepath.Join(dir, "old"))
			os.WriteFile(filepath.Join(dir, "t"), []byte("x"), 0o755)
		},
		"no exec bit": func(dir string) { os.Chmod(filepath.Join(dir, "t"), 0o644) },
		"receipt edited": func(dir string) {
			p := filepath.Join(dir, "t.d", ReceiptName)
			b, _ := os.ReadFile(p)
			os.Chmod(p, 0o644)
			os.WriteFile(p, []byte(strings.Replace(string(b), `"name":"t"`, `"name":"u"`, 1)), 0o444)
		},
		"exe is symlink": func(dir string) { os.Remove(filepath.Join(dir, "t")); os.Symlink("/bin/true", filepath.Join(dir, "t")) },
	}
	for name, tamper := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			if _, err := Install(f.manifest("t", nil), f.target("system")); err != nil {
				t.Fatal(err)
			}
			dir := f.target("system").ClassDir("tool")
			tamper(dir)
			if _, err := Inspect(f.target("system"), "tool", "t"); KindOf(err) != Unavailable {
				t.Fatalf("inspect: %v", err)
			}
			before := snapshot(t, f.source)
			if _, err := Uninstall(f.target("system"), "tool", "t", true); KindOf(err) != Unavailable {
				t.Fatalf("uninstall: %v", err)
			}
			sameSnapshot(t, before, snapshot(t, f.source))
		})
	}
}

func TestInspectArguments(t *testing.T) {
	f := newFixture(t)
	for _, tc := range [][3]string{{"model", "x", "user"}, {"tool", "a/b", "user"}, {"tool", "x", "global"}} {
		if _, err := Inspect(Target{Source: f.source, Tier: tc[2]}, tc[0], tc[1]); KindOf(err) != Invalid {
			t.Errorf("%v: %v", tc, err)
		}
	}
}

func TestWriteNewDir(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "out")
	files := []File{{"a.json", []byte("A")}, {"b.json", []byte("B")}}
	if err := WriteNewDir(out, "ctxmcp-project", files); err != nil {
		t.Fatal(err)
	}
	for _, fl := range files {
		if b, _ := os.ReadFile(filepath.Join(out, fl.Name)); string(b) != string(fl.Data) {
			t.Fatalf("%s = %q", fl.Name, b)
		}
	}
	before := snapshot(t, base)
	if err := WriteNewDir(out, "ctxmcp-project", files); KindOf(err) != Unavailable {
		t.Fatalf("second write: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, base))
	os.Symlink("nowhere", filepath.Join(base, "link"))
	before = snapshot(t, base)
	if err := WriteNewDir(filepath.Join(base, "link"), "p", files); KindOf(err) != Unavailable {
		t.Fatalf("over a dangling symlink: %v", err)
	}
	if err := WriteNewDir(filepath.Join(base, "new"), "p", []File{{"ok", nil}, {"../escape", nil}}); KindOf(err) != Invalid {
		t.Fatalf("bad name: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, base))
}

// inode returns the inode of path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// An executable that is the ctx binary is installed as a hard link, not a
// copy: of the tree's bin/ctx when it holds the same bytes, else, for a
// projected tool, of the artifact; never of a file that would fail the
// trust rule as a shared inode.
func TestInstallLinks(t *testing.T) {
	locator := `{"transport":"stdio","config":"/w/mcp.json","server":"s","tool":"t"}`
	mcp := func(m map[string]any) { m["controls"].(map[string]any)["mcp"] = locator }

	// The tree's bin/ctx, same bytes: linked whatever the object.
	f := newFixture(t)
	mp := f.manifest("plain.tool", nil)
	os.MkdirAll(filepath.Join(f.source, "bin"), 0o755)
	data, _ := os.ReadFile(filepath.Join(f.work, "bin", "plain.tool"))
	if err := os.WriteFile(filepath.Join(f.source, "bin", "ctx"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(mp, f.target("system")); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(f.source, "tool", "plain.tool")
	if inode(t, exe) != inode(t, filepath.Join(f.source, "bin", "ctx")) {
		t.Fatal("not a hard link of bin/ctx")
	}
	if _, err := Inspect(f.target("system"), "tool", "plain.tool"); err != nil {
		t.Fatal(err)
	}
	if _, err := Uninstall(f.target("system"), "tool", "plain.tool", true); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.source, "bin", "ctx")); err != nil || string(b) != string(data) {
		t.Fatalf("bin/ctx after uninstall: %v", err)
	}

	// No bin/ctx: a projected tool links its artifact, a plain one copies.
	f = newFixture(t)
	mp = f.manifest("s.t", mcp)
	if _, err := Install(mp, f.target("user")); err != nil {
		t.Fatal(err)
	}
	dir := f.target("user").ClassDir("tool")
	if inode(t, filepath.Join(dir, "s.t")) != inode(t, filepath.Join(f.work, "bin", "s.t")) {
		t.Fatal("projected tool is not a hard link of its artifact")
	}
	mp = f.manifest("plain.copy", nil)
	if _, err := Install(mp, f.target("user")); err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(dir, "plain.copy")) == inode(t, filepath.Join(f.work, "bin", "plain.copy")) {
		t.Fatal("a plain artifact was linked")
	}

	// A group-writable artifact would make the shared inode untrusted: copied.
	mp = f.manifest("s.gw", mcp)
	os.Chmod(filepath.Join(f.work, "bin", "s.gw"), 0o775)
	if _, err := Install(mp, f.target("user")); err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(dir, "s.gw")) == inode(t, filepath.Join(f.work, "bin", "s.gw")) {
		t.Fatal("a group-writable artifact was linked")
	}
	if st, _ := os.Stat(filepath.Join(dir, "s.gw")); st.Mode().Perm() != 0o755 {
		t.Fatalf("copy mode %v", st.Mode())
	}

	// Where no link can be made, a copy.
	linkDisabled = true
	defer func() { linkDisabled = false }()
	mp = f.manifest("s.nolink", mcp)
	if _, err := Install(mp, f.target("user")); err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(dir, "s.nolink")) == inode(t, filepath.Join(f.work, "bin", "s.nolink")) {
		t.Fatal("linked although linking is disabled")
	}
	if _, err := Inspect(f.target("user"), "tool", "s.nolink"); err != nil {
		t.Fatal(err)
	}
}
