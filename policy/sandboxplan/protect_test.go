package sandboxplan

import (
	"reflect"
	"testing"
)

func TestProtectOps(t *testing.T) {
	wp := &WorkspaceProtect{Paths: []string{".git", "sub/.git"}, GitDirs: []GitDirMount{{"/home/me/repo/.git", "/repo/.git"}}}
	ops := ProtectOps(wp, true)
	want := []Op{
		{Kind: OpProtectPath, Target: "/workspace/.git", Why: "protect .git"},
		{Kind: OpProtectPath, Target: "/workspace/sub/.git", Why: "protect sub/.git"},
		{Kind: OpBind, Source: "/home/me/repo/.git", Target: "/repo/.git", ReadOnly: true, NoSuid: true, NoDev: true, NoExec: true,
			Why: "protect: git directory /home/me/repo/.git"},
	}
	if !reflect.DeepEqual(ops, want) {
		t.Errorf("ops %+v", ops)
	}
	// Without perm w the workspace is read-only as a whole: only the git
	// directory, so that git still reads it.
	if ops := ProtectOps(wp, false); len(ops) != 1 || ops[0].Kind != OpBind {
		t.Errorf("read-only agent: %+v", ops)
	}
	if ProtectOps(nil, true) != nil {
		t.Error("nil facts gave ops")
	}
}

func TestBuildPlanProtect(t *testing.T) {
	in := PlanInput{Agent: mustAgent(t, "coder", coderControls()), Iso: "userns", RootDir: "/ctx", NewRoot: "/ctx/home/1000/agent/coder/root",
		Workspace: "/home/me/project", AgentHome: "/ctx/home/1000/agent/coder", ProcDir: "/run/user/1000/cortexfs/run/x", Argv: []string{"true"}}
	in.Protect = &WorkspaceProtect{Paths: []string{".git"}}
	p, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	ws, prot := -1, -1
	for i, op := range p.Ops {
		switch {
		case op.Kind == OpBind && op.Target == SandboxWorkspace:
			ws = i
		case op.Kind == OpProtectPath:
			prot = i
			if op.Target != "/workspace/.git" {
				t.Errorf("protect target %s", op.Target)
			}
		}
	}
	if ws < 0 || prot != ws+1 {
		t.Errorf("workspace bind at %d, protect at %d: the protection must follow the workspace bind", ws, prot)
	}
}

func TestGitDirTargetAllowed(t *testing.T) {
	for _, ok := range []string{"/home/me/repo/.git", "/tmp/x/.git", "/srv/git/a.git"} {
		if err := GitDirTargetAllowed(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"/", "/usr/src/x/.git", "/proc/1", "/workspace/.git", "/ctx/x", "/home/agent/r/.git", "/home", "relative/.git", "/a/../b"} {
		if err := GitDirTargetAllowed(bad); err == nil {
			t.Errorf("%s allowed", bad)
		}
	}
}
