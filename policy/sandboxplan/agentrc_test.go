package sandboxplan

import (
	"strings"
	"testing"
)

// TestBuildPlanAgentrc: the plan's agentrc /mnt (ctx man agentrc): each
// skill bundle read-only at /mnt/skills/NAME and the agent's own skills
// read-only over /home/agent/skills after the home is bound; an MCP tool
// at /mnt/mcp/SERVER/TOOL with its toolspec beside it, once per server
// and MCP name (the first tool wins, as CTX_PATH lookup would).
func TestBuildPlanAgentrc(t *testing.T) {
	home := "/ctx/home/1000/agent/coder"
	in := PlanInput{Agent: mustAgent(t, "coder", coderControls()), Iso: "userns", RootDir: "/ctx", NewRoot: home + "/root",
		Workspace: "/home/me/project", AgentHome: home, ProcDir: "/run/user/1000/cortexfs/run/x", Argv: []string{"true"},
		SkillsDir: home + "/skills",
		Skills:    []Skill{{Name: "review", HostDir: home + "/skills/review"}, {Name: "lint", HostDir: "/ctx/shared/proj/skills/lint"}},
		Tools: []ProjectedTool{
			{Name: "gh.search", Tier: "/ctx/tool", HostPath: "/ctx/tool/gh.search", HostDotD: "/ctx/tool/gh.search.d", Schema: []byte(`{"name":"gh.search"}`), MCPServer: "gh", MCPTool: "search"},
			{Name: "other.search", Tier: "/ctx/tool", HostPath: "/ctx/tool/other.search", HostDotD: "/ctx/tool/other.search.d", Schema: []byte(`{}`), MCPServer: "gh", MCPTool: "search"},
		}}
	p, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	count := map[string]int{}
	for i, op := range p.Ops {
		key := string(op.Kind) + " " + op.Target
		if _, ok := index[key]; !ok {
			index[key] = i
		}
		count[key]++
	}
	want := func(kind OpKind, target, source string, ro bool) int {
		t.Helper()
		i, ok := index[string(kind)+" "+target]
		if !ok {
			t.Fatalf("no %s op at %s", kind, target)
		}
		if op := p.Ops[i]; op.Source != source || op.ReadOnly != ro {
			t.Errorf("%s %s: %+v", kind, target, op)
		}
		return i
	}
	want(OpBind, "/mnt/skills/review", home+"/skills/review", true)
	want(OpBind, "/mnt/skills/lint", "/ctx/shared/proj/skills/lint", true)
	homeBind := want(OpBind, SandboxHome, home, false)
	if skills := want(OpBind, SandboxHome+"/skills", home+"/skills", true); skills < homeBind {
		t.Errorf("the skills bind (op %d) comes before the home it covers (op %d)", skills, homeBind)
	}
	want(OpBind, "/mnt/mcp/gh/search", "/ctx/tool/gh.search", true)
	if n := count["bind /mnt/mcp/gh/search"]; n != 1 {
		t.Errorf("/mnt/mcp/gh/search bound %d times", n)
	}
	// The /mnt tmpfs's Fill: the toolspec beside the MCP tool's mount
	// point, a link and a toolspec per tool in tools/; the tmpfs comes
	// before the binds that go into it, and is made read-only after them.
	tmpfs := p.Ops[want(OpTmpfs, "/mnt", "", false)]
	fill := map[string]FillEntry{}
	for _, e := range tmpfs.Fill {
		if _, dup := fill[e.Path]; dup {
			t.Errorf("fill entry %s twice", e.Path)
		}
		fill[e.Path] = e
	}
	for path, kind := range map[string]string{"mcp/gh": FillDir, "tools/gh.search": FillLink,
		"tools/other.search.toolspec.json": FillFile, "skills": FillDir, "SOP": FillFile} {
		if fill[path].Kind != kind {
			t.Errorf("fill entry %s: %+v, want kind %s", path, fill[path], kind)
		}
	}
	if spec := fill["mcp/gh/search.toolspec.json"]; string(spec.Data) != `{"name":"gh.search"}` {
		t.Errorf("toolspec %+v", spec)
	}
	if link := fill["tools/gh.search"].Link; link != SandboxRoot+"/bin/ctx" {
		t.Errorf("tools/gh.search links to %q", link)
	}
	i := index["tmpfs /mnt"]
	if i > index["bind /mnt/skills/lint"] || i > index["bind /mnt/mcp/gh/search"] || i > index["bind /mnt/proc"] {
		t.Errorf("the /mnt tmpfs comes after the binds that go into it")
	}
	if i := index["readonly /mnt"]; i < index["bind /mnt/skills/lint"] || i < index["bind /mnt/mcp/gh/search"] {
		t.Errorf("/mnt is made read-only before its binds")
	}

	// Without a skills directory (iso modes that have none) nothing covers
	// /home/agent/skills, and /mnt/skills is an empty directory.
	in.SkillsDir, in.Skills = "", nil
	p, err = BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range p.Ops {
		if strings.HasPrefix(op.Target, "/mnt/skills/") || op.Target == SandboxHome+"/skills" {
			t.Errorf("unexpected %+v", op)
		}
	}
}
