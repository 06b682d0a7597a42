package runhost

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"ctx/fsops"
	"ctx/manual"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// TestManualSandboxListsProtectDefaults keeps the default set in `ctx man
// sandbox` (the first block of PROTECTED PATHS) in step with
// policy.DefaultProtectEntries: the same entries, in the same order.
func TestManualSandboxListsProtectDefaults(t *testing.T) {
	page, ok := manual.Read("ctx.sandbox.md")
	if !ok {
		t.Fatal("no ctx.sandbox.md")
	}
	_, section, ok := strings.Cut(string(page), "\n## PROTECTED PATHS\n")
	if !ok {
		t.Fatal("ctx man sandbox has no PROTECTED PATHS section")
	}
	_, block, ok := strings.Cut(section, "```\n")
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	if !ok {
		t.Fatal("PROTECTED PATHS has no default list block")
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(line, " ") {
			listed = append(listed, f[0])
		}
	}
	var want []string
	for _, p := range policy.DefaultProtectEntries() {
		want = append(want, p.String())
	}
	if !reflect.DeepEqual(listed, want) {
		t.Errorf("ctx man sandbox lists\n%q\nthe code protects\n%q", listed, want)
	}
}

func protectAgent(t *testing.T, extra ...string) *policy.Agent {
	t.Helper()
	c := map[string][]byte{"label": []byte("coder_t\n"), "perm": []byte("rwx\n"), "uid": []byte("1000\n"), "gid": []byte("1000\n"), "policy": nil}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i]] = []byte(extra[i+1])
	}
	a, err := policy.ParseAgent("coder", c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mkfile(t testing.TB, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGatherProtect(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	// the workspace's repository, a nested one, a submodule of it, project
	// configs at some depth
	mkfile(t, filepath.Join(ws, ".git/HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(ws, ".git/modules/sub/HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(ws, "sub/.git"), "gitdir: ../.git/modules/sub\n")
	mkfile(t, filepath.Join(ws, "libs/one/.git/HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(ws, "libs/one/.vscode/tasks.json"), "{}\n")
	mkfile(t, filepath.Join(ws, "a/b/c/.envrc"), "echo hi\n")
	mkfile(t, filepath.Join(ws, ".gitmodules"), "[submodule \"sub\"]\n")
	// a linked worktree of a repository outside, which points back
	main := filepath.Join(base, "main/.git")
	mkfile(t, filepath.Join(main, "HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(main, "worktrees/wt/commondir"), "../..\n")
	mkfile(t, filepath.Join(main, "worktrees/wt/gitdir"), filepath.Join(ws, "wt/.git")+"\n")
	mkfile(t, filepath.Join(ws, "wt/.git"), "gitdir: "+filepath.Join(main, "worktrees/wt")+"\n")
	// a .git file planted to open a host directory: it does not point back
	secret := filepath.Join(base, "secret")
	mkfile(t, filepath.Join(secret, "key"), "k\n")
	mkfile(t, filepath.Join(ws, "planted/.git"), "gitdir: "+secret+"\n")
	// not protected: ordinary work
	mkfile(t, filepath.Join(ws, "Makefile"), "all:\n")

	r := &AgentRun{Agent: protectAgent(t), workspace: ws, iso: policy.IsoUID}
	lines, err := r.gatherProtect()
	if err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{".git", ".gitmodules", "a/b/c/.envrc", "libs/one/.git", "libs/one/.vscode", "planted/.git", "sub/.git", "wt/.git"}
	if !reflect.DeepEqual(r.protect.wp.Paths, wantPaths) {
		t.Errorf("paths %q\nwant  %q", r.protect.wp.Paths, wantPaths)
	}
	wantGit := []sandboxplan.GitDirMount{{Host: main, Sandbox: main}}
	if !reflect.DeepEqual(r.protect.wp.GitDirs, wantGit) {
		t.Errorf("git directories %+v, want %+v", r.protect.wp.GitDirs, wantGit)
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		"workspace protect .git .gitmodules a/b/c/.envrc libs/one/.git libs/one/.vscode planted/.git sub/.git wt/.git (read-only)",
		"workspace protect git directory " + main + " (read-only, outside the workspace, at its own path)",
		"planted/.git: its git directory \"" + secret + "\" is not shown",
		"workspace protect git safe.directory /workspace/wt",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("policy lines lack %q:\n%s", want, text)
		}
	}
	if !hasEnv(r.env, "GIT_CONFIG_COUNT") || !strings.Contains(strings.Join(r.env, " "), "GIT_CONFIG_VALUE_0=/workspace/wt") {
		t.Errorf("uid mode env %q", r.env)
	}

	// userns: the worktree's directory is the caller's, no git setting
	r = &AgentRun{Agent: protectAgent(t), workspace: ws, iso: policy.IsoUserns}
	if _, err := r.gatherProtect(); err != nil || hasEnv(r.env, "GIT_CONFIG_COUNT") {
		t.Errorf("userns: %v %q", err, r.env)
	}

	// Taking **/.git out and protecting only hooks and config.
	r = &AgentRun{Agent: protectAgent(t, "protect", "!**/.git\n.git/hooks\n.git/config\n"), workspace: ws, iso: policy.IsoUserns}
	mkfile(t, filepath.Join(ws, ".git/config"), "[core]\n")
	os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
	lines, err = r.gatherProtect()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.protect.wp.Paths; !reflect.DeepEqual(got, []string{".git/config", ".git/hooks", ".gitmodules", "a/b/c/.envrc", "libs/one/.vscode"}) {
		t.Errorf("with !**/.git: %q", got)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "taken out by agent/coder.d/protect: !**/.git") {
		t.Errorf("lines %q", lines)
	}
}

func TestGatherProtectRefusesSymlinks(t *testing.T) {
	for _, tt := range []struct{ link, target, says string }{
		{".vscode", "/etc", `protected path .vscode is a symlink (to "/etc")`},
		{".config", "/root/.config", `protected path .config/git: .config is a symlink`},
		{"proj/.git", "../elsewhere", `protected path proj/.git is a symlink`},
	} {
		ws := t.TempDir()
		ws, _ = filepath.EvalSymlinks(ws)
		os.MkdirAll(filepath.Dir(filepath.Join(ws, tt.link)), 0o755)
		if err := os.Symlink(tt.target, filepath.Join(ws, tt.link)); err != nil {
			t.Fatal(err)
		}
		r := &AgentRun{Agent: protectAgent(t), workspace: ws, iso: policy.IsoUserns}
		_, err := r.gatherProtect()
		if err == nil || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), "! line in agent/coder.d/protect") {
			t.Errorf("%s -> %s: %v", tt.link, tt.target, err)
		}
	}
}

// TestProtectQuarantine is the end of a run on a plain directory (the
// sandbox's part is in the script tests): the attacks a run could leave
// (a new repository with core.fsmonitor, new .envrc and agent-CLI
// settings, an existing protected file changed, one removed, a directory
// renamed around a protected one) each end up moved aside with their
// content intact, the originals back in place, and nothing else touched.
func TestProtectQuarantine(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	mkfile(t, filepath.Join(ws, ".git/HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(ws, ".git/config"), "[core]\n")
	mkfile(t, filepath.Join(ws, ".git/hooks/pre-commit.sample"), "sample\n")
	mkfile(t, filepath.Join(ws, ".git/objects/ab/cdef"), "object\n")
	mkfile(t, filepath.Join(ws, "p/.vscode/settings.json"), "{}\n")
	mkfile(t, filepath.Join(ws, "q/.envrc"), "person\n")
	mkfile(t, filepath.Join(ws, "node_modules/x/index.js"), "js\n")
	r := &AgentRun{Agent: protectAgent(t), workspace: ws, iso: policy.IsoLandlock, RunID: "ctx-run1"}
	if _, err := r.gatherProtect(); err != nil {
		t.Fatal(err)
	}
	if got := r.protectQuarantine(); got != nil {
		t.Fatalf("nothing changed: %q", got)
	}
	// the attacks
	mkfile(t, filepath.Join(ws, "newsub/.git/config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	mkfile(t, filepath.Join(ws, "newsub/.git/hooks/post-checkout"), "evil\n")
	mkfile(t, filepath.Join(ws, "newsub/.git/hooks/pre-push.sample"), "sample\n")
	mkfile(t, filepath.Join(ws, ".envrc"), "evil\n")
	mkfile(t, filepath.Join(ws, "a/b/.claude/settings.json"), `{"hooks":{}}`)
	mkfile(t, filepath.Join(ws, ".mcp.json"), "{}\n")
	for _, f := range []string{"HEAD", "objects/x", "refs/heads/main"} {
		mkfile(t, filepath.Join(ws, "w/bare.git", f), "x\n")
	}
	mkfile(t, filepath.Join(ws, "w/bare.git/config"), "[core]\n\tpager = touch /tmp/pwned\n")
	os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n\thooksPath = /tmp\n"), 0o644)
	os.Remove(filepath.Join(ws, "q/.envrc"))
	os.Rename(filepath.Join(ws, "p"), filepath.Join(ws, "p2"))
	// legitimate work elsewhere
	mkfile(t, filepath.Join(ws, "node_modules/y/index.js"), "js\n")
	mkfile(t, filepath.Join(ws, ".git/objects/12/3456"), "object\n")
	got := r.protectQuarantine()
	var lines []string
	for _, c := range got {
		lines = append(lines, c.String())
	}
	const q = ".ctx-quarantine-ctx-run1"
	want := []string{
		".envrc: created, quarantined as .envrc" + q,
		".git/config: changed, quarantined as .git/config" + q + "; original restored",
		".mcp.json: created, quarantined as .mcp.json" + q,
		"a/b/.claude/settings.json: created, quarantined as a/b/.claude/settings.json" + q,
		"newsub/.git/config: created, quarantined as newsub/.git/config" + q,
		"newsub/.git/hooks/post-checkout: created, quarantined as newsub/.git/hooks/post-checkout" + q,
		"p2/.vscode/settings.json: moved here unchanged from p/.vscode/settings.json, left in place",
		"q/.envrc: removed; original restored",
		"w/bare.git/config: created, quarantined as w/bare.git/config" + q,
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("changes\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for path, content := range map[string]string{
		".envrc" + q: "evil\n", ".git/config": "[core]\n", ".git/config" + q: "[core]\n\thooksPath = /tmp\n",
		"newsub/.git/config" + q: "[core]\n\tfsmonitor = touch /tmp/pwned\n", "q/.envrc": "person\n",
		"a/b/.claude/settings.json" + q: `{"hooks":{}}`, "newsub/.git/hooks/pre-push.sample": "sample\n",
		"node_modules/y/index.js": "js\n", ".git/objects/12/3456": "object\n", "p2/.vscode/settings.json": "{}\n",
	} {
		if b, err := os.ReadFile(filepath.Join(ws, path)); err != nil || string(b) != content {
			t.Errorf("%s: %q %v, want %q", path, b, err, content)
		}
	}
	for _, gone := range []string{".envrc", ".mcp.json", "newsub/.git/config", "a/b/.claude/settings.json", "newsub/.git/hooks/post-checkout"} {
		if _, err := os.Lstat(filepath.Join(ws, gone)); err == nil {
			t.Errorf("%s still in place", gone)
		}
	}
	// A read-only agent cannot have changed anything: no census.
	r.Agent = protectAgent(t, "perm", "r--\n")
	if _, err := r.gatherProtect(); err != nil || r.protect.start != nil {
		t.Errorf("perm r--: census %v, %v", r.protect.start, err)
	}
}

// TestProtectQuarantineOptOut: a default the protect control takes out
// ("!**/.vscode") is left out of the comparison too; the rest of the set
// is still moved aside.
func TestProtectQuarantineOptOut(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	r := &AgentRun{Agent: protectAgent(t, "protect", "!**/.vscode\n"), workspace: ws, iso: policy.IsoUserns, RunID: "ctx-run2"}
	if _, err := r.gatherProtect(); err != nil {
		t.Fatal(err)
	}
	mkfile(t, filepath.Join(ws, "p/.vscode/tasks.json"), "{}\n")
	mkfile(t, filepath.Join(ws, "p/.envrc"), "x\n")
	got := r.protectQuarantine()
	if len(got) != 1 || got[0].rel != "p/.envrc" {
		t.Errorf("changes %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "p/.vscode/tasks.json")); err != nil {
		t.Errorf("taken-out path moved: %v", err)
	}
}

// TestProtectQuarantineDecoys: the run makes more protected paths than
// the findings list holds, the one that matters sorting last
// among them; every one is still moved aside, and the list says how many it
// left out.
func TestProtectQuarantineDecoys(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	r := &AgentRun{Agent: protectAgent(t), workspace: ws, iso: policy.IsoUserns, RunID: "ctx-run3"}
	if _, err := r.gatherProtect(); err != nil {
		t.Fatal(err)
	}
	n := maxProtectChanges + 200
	for i := 0; i < n; i++ {
		mkfile(t, filepath.Join(ws, fmt.Sprintf("d%04d/.envrc", i)), "decoy\n")
	}
	mkfile(t, filepath.Join(ws, "zz/.git/config"), "[core]\n\tfsmonitor = x\n")
	got := r.protectQuarantine()
	if len(got) != maxProtectChanges+1 || got[len(got)-1].what != "and 201 more findings not listed" {
		t.Errorf("%d findings, last %q", len(got), got[len(got)-1])
	}
	left, _ := filepath.Glob(filepath.Join(ws, "*/.envrc"))
	if _, err := os.Lstat(filepath.Join(ws, "zz/.git/config")); err == nil || len(left) != 0 {
		t.Errorf("left in place: %d .envrc, zz/.git/config %v", len(left), err)
	}
}

// BenchmarkProtectCensus is the end of a run's cost on a workspace of
// 100,000 files (1,000 packages of 5 directories of 20 files, a
// node_modules shape, and a repository at the top): one census, as the
// start and the end each take (ctx man sandbox, QUARANTINE).
func BenchmarkProtectCensus(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	for _, f := range []string{".git/HEAD", ".git/config", ".git/hooks/pre-commit.sample", ".vscode/settings.json"} {
		mkfile(b, filepath.Join(ws, f), "x\n")
	}
	for p := 0; p < 1000; p++ {
		for d := 0; d < 5; d++ {
			dir := filepath.Join(ws, "node_modules", fmt.Sprintf("pkg%d", p), fmt.Sprintf("d%d", d))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := 0; f < 20; f++ {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.js", f)), nil, 0o644)
			}
		}
	}
	set := policy.EffectiveProtect(nil)
	// The peer, measured beside it: the least any census must do, a walk
	// that reads every directory of the tree (filepath.WalkDir).
	b.Run("census", func(b *testing.B) {
		for b.Loop() {
			c := fsops.TakeProtectCensus(ws, set, nil, true, nil)
			if len(c.Items) != 2 || c.Truncated {
				b.Fatalf("census %d items", len(c.Items))
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			n := 0
			filepath.WalkDir(ws, func(string, fs.DirEntry, error) error { n++; return nil })
			if n < 100000 {
				b.Fatalf("walked %d entries", n)
			}
		}
	})
}
