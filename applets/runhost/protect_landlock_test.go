package runhost

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ctx/fsops/sandbox"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// protectTree is a workspace with a repository, a nested one, a worktree
// of a repository outside, a planted .git file and ordinary work.
func protectTree(t *testing.T) (base, ws, main string) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(base, "ws")
	mkfile(t, filepath.Join(ws, ".git/HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(ws, "libs/one/.git/HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(ws, "libs/one/code.go"), "package one\n")
	mkfile(t, filepath.Join(ws, "Makefile"), "all:\n")
	mkfile(t, filepath.Join(ws, "src/main.c"), "int main;\n")
	main = filepath.Join(base, "main/.git")
	for _, d := range []string{"objects", "refs"} {
		os.MkdirAll(filepath.Join(main, d), 0o755)
	}
	mkfile(t, filepath.Join(main, "HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(main, "worktrees/wt/HEAD"), "ref: refs/heads/wt\n")
	mkfile(t, filepath.Join(main, "worktrees/wt/commondir"), "../..\n")
	mkfile(t, filepath.Join(main, "worktrees/wt/gitdir"), filepath.Join(ws, "wt/.git")+"\n")
	mkfile(t, filepath.Join(ws, "wt/.git"), "gitdir: "+filepath.Join(main, "worktrees/wt")+"\n")
	mkfile(t, filepath.Join(base, "secret/key"), "k\n")
	mkfile(t, filepath.Join(ws, "planted/.git"), "gitdir: "+filepath.Join(base, "secret")+"\n")
	return base, ws, main
}

func writeRules(access []sandboxplan.AccessRule) map[string]bool {
	m := map[string]bool{}
	for _, a := range access {
		if a.Write {
			m[a.Path] = true
		}
	}
	return m
}

func TestGatherProtectLandlock(t *testing.T) {
	base, ws, main := protectTree(t)
	r := &AgentRun{Agent: protectAgent(t), workspace: ws, iso: policy.IsoLandlock}
	lines, err := r.gatherProtect()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		"workspace protect .git libs/one/.git planted/.git wt/.git (read-only: Landlock)",
		"workspace protect absent .gitmodules ",
		"(cannot be created: ",
		"workspace protect git directory " + main + " (read-only, outside the workspace: a Landlock read rule)",
		"workspace protect landlock: 3 write rules from the workspace beside the protected paths; no entry can be created, removed or renamed directly in . libs libs/one planted wt (",
		`planted/.git: its git directory "` + filepath.Join(base, "secret") + `" is not shown`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("policy lines lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "not enforced") || hasEnv(r.env, "GIT_CONFIG_COUNT") {
		t.Errorf("lines %s, env %q", text, r.env)
	}
	if want := (sandboxplan.GitDirMount{Host: main, Sandbox: main}); len(r.protect.wp.GitDirs) != 1 || r.protect.wp.GitDirs[0] != want {
		t.Errorf("git directories %+v", r.protect.wp.GitDirs)
	}
	// The plan: the workspace rule decomposed, the home's rule as it was.
	home := filepath.Join(base, "home/data")
	r.plan = &sandboxplan.Plan{Iso: string(policy.IsoLandlock), Argv: []string{"sh"}, Cwd: ws, Access: []sandboxplan.AccessRule{
		{Path: ws, Write: true, Exec: true, Optional: true},
		{Path: main, Optional: true},
		{Path: home, Write: true, Optional: true},
	}}
	if err := r.protectLandlockPlan(); err != nil {
		t.Fatal(err)
	}
	w := writeRules(r.plan.Access)
	for _, p := range []string{"Makefile", "src", "libs/one/code.go", home} {
		if !filepath.IsAbs(p) {
			p = filepath.Join(ws, p)
		}
		if !w[p] {
			t.Errorf("%s is not writable: %v", p, w)
		}
	}
	for p := range w {
		if p == ws || strings.Contains(p, ".git") || p == main {
			t.Errorf("%s is writable", p)
		}
	}
}

func TestGatherProtectShared(t *testing.T) {
	if abi, _ := sandbox.LandlockABI(); abi == 0 {
		t.Skip("no Landlock here")
	}
	base, ws, main := protectTree(t)
	r := &AgentRun{Agent: protectAgent(t), workspace: ws, iso: policy.IsoShared}
	lines, err := r.gatherProtect()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		"workspace protect .git libs/one/.git planted/.git wt/.git (read-only: Landlock, iso shared)",
		"workspace protect git directory " + main + " (read-only, outside the workspace: no Landlock write rule)",
		"write rules from / beside the protected paths; no entry can be created, removed or renamed directly in / ",
		`planted/.git: "` + filepath.Join(base, "secret") + `" is not a git directory`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("policy lines lack %q:\n%s", want, text)
		}
	}
	rules := map[string]bool{}
	for _, p := range r.protect.sharedRules {
		rules[p] = true
		if within(p, filepath.Join(ws, ".git")) || within(p, main) || p == ws || p == base || p == "/" {
			t.Errorf("%s is writable", p)
		}
	}
	for _, p := range []string{filepath.Join(ws, "Makefile"), filepath.Join(ws, "src"), filepath.Join(base, "secret")} {
		if !rules[p] {
			t.Errorf("%s has no write rule", p)
		}
	}
	// The rules file for ctx-confine, and the note for agent.start.
	r.runtime, r.RunID = t.TempDir(), "ctx-test"
	if err := r.protectShared(lines); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(r.protect.rulesFile)
	if err != nil || strings.Count(string(data), "\x00") != len(r.protect.sharedRules) {
		t.Errorf("rules file: %v", err)
	}
	if !hasEnv(r.env, sandbox.ConfineLandlockEnv) || !strings.HasPrefix(r.protectEventNote(), " workspace protect .git ") {
		t.Errorf("env %q, note %q", r.env, r.protectEventNote())
	}
}

func TestProtectLandlockTooManyEntries(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	mkfile(t, filepath.Join(ws, ".git/HEAD"), "x\n")
	big := filepath.Join(ws, "big")
	mkfile(t, filepath.Join(big, ".git/HEAD"), "x\n")
	for i := 0; i < sandboxplan.MaxProtectDirEntries; i++ {
		if err := os.WriteFile(filepath.Join(big, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := readProtectDir(big)
	if err != nil || len(entries) <= sandboxplan.MaxProtectDirEntries || len(entries) > sandboxplan.MaxProtectDirEntries+512 {
		t.Fatalf("read %d entries: %v", len(entries), err)
	}
	r := &AgentRun{Agent: protectAgent(t), workspace: ws, iso: policy.IsoLandlock}
	_, err = r.gatherProtect()
	var le *sandboxplan.ProtectLimitError
	if !errors.As(err, &le) || le.Dir != big || !strings.Contains(err.Error(), big+", on the way to a protected path, has more than 4096 entries") {
		t.Errorf("%v", err)
	}
}
