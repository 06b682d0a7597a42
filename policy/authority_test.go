package policy

import (
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

func TestWithinIsPathAware(t *testing.T) {
	for _, tt := range []struct {
		p, dir string
		want   bool
	}{
		{"/root", "/root", true},
		{"/root/x", "/root", true},
		{"/root2", "/root", false},
		{"/root2/x", "/root", false},
		{"/ro", "/root", false},
		{"/anything", "/", true},
		{"/", "/", true},
		{"/", "/a", false},
	} {
		if got := Within(tt.p, tt.dir); got != tt.want {
			t.Errorf("Within(%q, %q) = %v", tt.p, tt.dir, got)
		}
	}
}

func TestViewLocate(t *testing.T) {
	v := View{Mounts: []Mount{
		{Source: "/srv/ctx", Target: "/ctx", ReadOnly: true},
		{Source: "/srv/ctx/home/1000/agent/coder", Target: "/home/agent"},
		{Source: "/home/me/project", Target: "/workspace"},
		{Source: "/root", Target: "/r", NoExec: true},
		{Source: "/srv/other", Target: "/ctx/tool"}, // shadows /srv/ctx/tool
		{Source: "/", Target: "/host", ReadOnly: true},
	}}
	for _, tt := range []struct {
		host    string
		sandbox string // "" = not visible
		target  string // mount target expected to serve it
	}{
		{"/srv/ctx/bin/ctx", "/ctx/bin/ctx", "/ctx"},
		{"/srv/ctx", "/ctx", "/ctx"},
		{"/srv/ctx/home/1000/agent/coder/x", "/home/agent/x", "/home/agent"}, // longest source wins
		{"/home/me/project/a/b", "/workspace/a/b", "/workspace"},
		{"/root/f", "/r/f", "/r"},
		{"/root2/f", "/host/root2/f", "/host"},                           // never a string-prefix match of /root
		{"/srv/ctx/tool/fs.read", "/host/srv/ctx/tool/fs.read", "/host"}, // shadowed at /ctx/tool, still seen via /host
		{"/srv/other/fs.read", "/ctx/tool/fs.read", "/ctx/tool"},
		{"/srv/ctx/../ctx/bin/ctx", "/ctx/bin/ctx", "/ctx"}, // cleaned first
		{"relative/path", "", ""},
	} {
		loc, ok := v.Locate(tt.host)
		if tt.sandbox == "" {
			if ok {
				t.Errorf("Locate(%q) = %+v, want invisible", tt.host, loc)
			}
			continue
		}
		if !ok || loc.SandboxPath != tt.sandbox || loc.Mount.Target != tt.target {
			t.Errorf("Locate(%q) = %+v %v, want %s via %s", tt.host, loc, ok, tt.sandbox, tt.target)
		}
	}
	// Without the /host entry a shadowed path is invisible.
	v.Mounts = v.Mounts[:5]
	if loc, ok := v.Locate("/srv/ctx/tool/fs.read"); ok {
		t.Errorf("shadowed path visible at %+v", loc)
	}
	if _, ok := v.Locate("/root2/f"); ok {
		t.Error("/root2 visible through a mount of /root")
	}
}

func TestAgentViewOrder(t *testing.T) {
	a, err := ParseAgent("coder", withControls(coderControls(), "mount", "/srv/mine\t/ctx\trw\t-\n"))
	if err != nil {
		t.Fatal(err)
	}
	v := a.View([]Mount{{Source: "/srv/ctx", Target: "/ctx", ReadOnly: true}})
	if len(v.Mounts) != 2 || v.Mounts[0].Source != "/srv/ctx" || v.Mounts[1].Source != "/srv/mine" {
		t.Fatalf("view %+v", v)
	}
	// The explicit entry is mounted last, so it serves /ctx.
	if _, ok := v.Locate("/srv/ctx/x"); ok {
		t.Error("implicit entry visible under the explicit one at the same target")
	}
	if loc, ok := v.Locate("/srv/mine/x"); !ok || loc.SandboxPath != "/ctx/x" {
		t.Errorf("explicit entry: %+v %v", loc, ok)
	}
}

// checkFixture is an agent and a world where every layer allows executing
// tool fs.read; each test breaks exactly one thing.
type checkFixture struct {
	agent *Agent
	view  View
	facts Facts
}

func newCheckFixture(t *testing.T) *checkFixture {
	t.Helper()
	a, err := ParseAgent("coder", withControls(coderControls(),
		"perm", "r--\n",
		"groups", "50\n",
		"policy", "allow coder_t tool:fs.read execute\nallow coder_t tool:fs.write execute\nallow coder_t tool:grep execute\n"+
			"allow coder_t shared:proj read\nallow coder_t shared:proj write\nallow coder_t network:default connect\n"+
			"allow coder_t agent:review-1 create\nallow coder_t session:s1 resume\nallow coder_t model:main use\n"))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := ParsePolicy([]byte("allow coder_t tool:fs.read execute\nallow coder_t tool:fs.write execute\nallow coder_t tool:grep execute\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &checkFixture{
		agent: a,
		view:  View{Mounts: []Mount{{Source: "/srv/ctx", Target: "/ctx", ReadOnly: true}}},
		facts: Facts{
			File:       &FileFacts{Path: "/srv/ctx/tool/fs.read", Mode: 0o755, UID: 0, GID: 0},
			ToolPolicy: tp,
		},
	}
}

func (f *checkFixture) tool(name string) Decision {
	return Check(f.agent, f.view, Object{ClassTool, name}, PermExecute, f.facts)
}

func layers(d Decision) string {
	var s []string
	for _, v := range d.Verdicts {
		mark := "+"
		if !v.Allowed {
			mark = "-"
		}
		s = append(s, mark+string(v.Layer))
	}
	return strings.Join(s, " ")
}

func TestCheckToolAllowed(t *testing.T) {
	f := newCheckFixture(t)
	d := f.tool("fs.read")
	if !d.Allowed || d.Errno != 0 || d.Layer != "" {
		t.Fatalf("denied: %+v", d)
	}
	if got := layers(d); got != "+linux-permission +mount-visibility +perm +agent-policy +tool-policy" {
		t.Errorf("verdicts %s", got)
	}
}

// TestCheckToolEachLayerRefuses breaks one layer at a time and expects that
// layer, and only it, to refuse with EACCES.
func TestCheckToolEachLayerRefuses(t *testing.T) {
	tests := []struct {
		name   string
		tool   string
		break_ func(f *checkFixture)
		layer  Layer
	}{
		{"no x for other", "fs.read", func(f *checkFixture) { f.facts.File.Mode = 0o754 }, LayerLinux},
		{"owner without x though other has it", "fs.read", func(f *checkFixture) {
			f.facts.File.UID, f.facts.File.Mode = 1000, 0o645
		}, LayerLinux},
		{"group without x though other has it", "fs.read", func(f *checkFixture) {
			f.facts.File.GID, f.facts.File.Mode = 50, 0o765
		}, LayerLinux},
		{"not a regular file", "fs.read", func(f *checkFixture) { f.facts.File.Mode = fs.ModeSymlink | 0o777 }, LayerLinux},
		{"not visible", "fs.read", func(f *checkFixture) { f.view.Mounts[0].Source = "/srv/ctx2" }, LayerMount},
		{"prefix is not visibility", "fs.read", func(f *checkFixture) {
			f.facts.File.Path = "/srv/ctx2/tool/fs.read"
			f.view.Mounts[0].Source = "/srv/ctx"
		}, LayerMount},
		{"noexec", "fs.read", func(f *checkFixture) { f.view.Mounts[0].NoExec = true }, LayerMount},
		{"perm ceiling", "fs.write", func(f *checkFixture) {}, LayerPerm},
		{"agent policy", "fs.read", func(f *checkFixture) {
			f.agent.Policy, _ = ParsePolicy([]byte("allow coder_t tool:fs.list execute\nallow other_t tool:fs.read execute\n"))
		}, LayerAgentPolicy},
		{"tool policy lacks rule", "fs.read", func(f *checkFixture) {
			f.facts.ToolPolicy, _ = ParsePolicy([]byte("allow reviewer_t tool:fs.read execute\n"))
		}, LayerToolPolicy},
		{"tool policy for another tool", "fs.read", func(f *checkFixture) {
			f.facts.ToolPolicy, _ = ParsePolicy([]byte("allow coder_t tool:fs.list execute\n"))
		}, LayerToolPolicy},
		{"tool policy missing", "fs.read", func(f *checkFixture) { f.facts.ToolPolicy = nil }, LayerToolPolicy},
		{"tool policy unparseable", "fs.read", func(f *checkFixture) {
			var err error
			f.facts.ToolPolicy, err = ParsePolicy([]byte("allow coder_t tool:* execute\n"))
			f.facts.ToolPolicyErr = err
		}, LayerToolPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCheckFixture(t)
			tt.break_(f)
			d := f.tool(tt.tool)
			if d.Allowed || d.Layer != tt.layer || d.Errno != syscall.EACCES {
				t.Fatalf("got allowed=%v layer=%s errno=%v (%s), want %s", d.Allowed, d.Layer, d.Errno, layers(d), tt.layer)
			}
			refused := 0
			for _, v := range d.Verdicts {
				if !v.Allowed {
					refused++
					if v.Layer != tt.layer {
						t.Errorf("layer %s also refused: %s", v.Layer, v.Reason)
					}
				}
			}
			if refused != 1 {
				t.Errorf("%d layers refused, want 1", refused)
			}
			if d.Errno != syscall.EACCES || d.Layer != tt.layer {
				t.Errorf("decision %s %s, want EACCES by %s", d.Errno, d.Layer, tt.layer)
			}
		})
	}
}

// TestCheckToolOrder breaks every layer at once: the decision is the first
// layer in the seed's order, and each later layer still reports.
func TestCheckToolOrder(t *testing.T) {
	order := []Layer{LayerLinux, LayerMount, LayerPerm, LayerAgentPolicy, LayerToolPolicy}
	breakers := []func(f *checkFixture){
		func(f *checkFixture) { f.facts.File.Mode = 0o644 },
		func(f *checkFixture) { f.view.Mounts = nil },
		func(f *checkFixture) { f.agent.Ceiling = 0 },
		func(f *checkFixture) { f.agent.Policy = nil },
		func(f *checkFixture) { f.facts.ToolPolicy = nil },
	}
	// Fix layers from the front: the decision moves to the next layer.
	for first := range order {
		f := newCheckFixture(t)
		for i := first; i < len(breakers); i++ {
			breakers[i](f)
		}
		d := f.tool("fs.read")
		if d.Layer != order[first] {
			t.Errorf("with layers %v broken, decision %s", order[first:], d.Layer)
		}
		if len(d.Verdicts) != len(order) {
			t.Fatalf("%d verdicts", len(d.Verdicts))
		}
		for i, v := range d.Verdicts {
			if v.Layer != order[i] || v.Allowed != (i < first) {
				t.Errorf("verdict %d: %s allowed=%v", i, v.Layer, v.Allowed)
			}
		}
	}
}

func TestCheckToolRootAndMissing(t *testing.T) {
	f := newCheckFixture(t)
	f.agent.UID, f.agent.GID = 0, 0
	f.facts.File.Mode = 0o100 // only the owner x bit; uid 0 needs any
	f.facts.File.UID = 1000
	if d := f.tool("fs.read"); !d.Allowed {
		t.Errorf("uid 0 with one x bit: %s", d.Reason)
	}
	f.facts.File.Mode = 0o644
	if d := f.tool("fs.read"); d.Layer != LayerLinux {
		t.Errorf("uid 0 without x: %+v", d)
	}
	f = newCheckFixture(t)
	f.facts.File = nil
	d := f.tool("fs.read")
	if d.Layer != LayerLinux || d.Errno != syscall.EACCES {
		t.Errorf("missing tool: %+v", d)
	}
}

func TestCheckToolUngatedByPerm(t *testing.T) {
	f := newCheckFixture(t)
	f.agent.Ceiling = 0
	f.facts.File.Path = "/srv/ctx/tool/grep"
	d := f.tool("grep")
	if !d.Allowed || d.Verdicts[2].Layer != LayerPerm || !d.Verdicts[2].Allowed {
		t.Errorf("a tool outside the perm map is governed by policy alone: %+v", d)
	}
}

func TestCeilingGatesTheSeedsTools(t *testing.T) {
	want := map[string]Ceiling{
		"fs.read": CeilingRead, "fs.list": CeilingRead, "fs.stat": CeilingRead,
		"fs.write": CeilingWrite, "fs.replace": CeilingWrite,
		"shell.exec": CeilingExec, "bash": CeilingExec, "tmux": CeilingExec, "zellij": CeilingExec,
	}
	for tool, bit := range want {
		if got, ok := CeilingFor(tool); !ok || got != bit {
			t.Errorf("CeilingFor(%s) = %s %v", tool, got, ok)
		}
	}
	for _, tool := range []string{"tsh", "tsh.config", "agent.create", "github.search_issues", "fs.read2"} {
		if _, ok := CeilingFor(tool); ok {
			t.Errorf("%s gated", tool)
		}
	}
}

func TestCheckShared(t *testing.T) {
	dir := func(mode fs.FileMode, uid, gid uint32) *FileFacts {
		return &FileFacts{Path: "/srv/ctx/shared/proj", Mode: fs.ModeDir | mode, UID: uid, GID: gid}
	}
	ro := View{Mounts: []Mount{{Source: "/srv/ctx", Target: "/ctx", ReadOnly: true}}}
	rw := View{Mounts: []Mount{
		{Source: "/srv/ctx", Target: "/ctx", ReadOnly: true},
		{Source: "/srv/ctx/shared/proj", Target: "/ctx/shared/proj"},
	}}
	tests := []struct {
		name  string
		perm  Permission
		file  *FileFacts
		view  View
		pol   string
		layer Layer // "" = allowed
	}{
		{"read allowed", PermRead, dir(0o755, 0, 0), ro, "", ""},
		{"write allowed", PermWrite, dir(0o770, 0, 50), rw, "", ""},
		{"write through ro mount", PermWrite, dir(0o777, 0, 0), ro, "", LayerMount},
		{"read lacks x", PermRead, dir(0o744, 0, 0), ro, "", LayerLinux},
		{"read lacks r", PermRead, dir(0o711, 0, 0), ro, "", LayerLinux},
		{"write lacks w for group", PermWrite, dir(0o757, 0, 50), rw, "", LayerLinux},
		{"owner class decides", PermRead, dir(0o055, 1000, 0), ro, "", LayerLinux},
		{"missing", PermRead, nil, ro, "", LayerLinux},
		{"file not dir", PermRead, &FileFacts{Path: "/srv/ctx/shared/proj", Mode: 0o755}, ro, "", LayerLinux},
		{"invisible", PermRead, dir(0o755, 0, 0), View{}, "", LayerMount},
		{"policy lacks rule", PermRead, dir(0o755, 0, 0), ro, "allow coder_t shared:proj write\n", LayerAgentPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCheckFixture(t)
			if tt.pol != "" {
				f.agent.Policy, _ = ParsePolicy([]byte(tt.pol))
			}
			d := Check(f.agent, tt.view, Object{ClassShared, "proj"}, tt.perm, Facts{File: tt.file})
			if d.Layer != tt.layer || d.Allowed != (tt.layer == "") {
				t.Errorf("got %s (%s): %s", d.Layer, layers(d), d.Reason)
			}
			if got := layers(d); !strings.Contains(got, "linux-permission") || !strings.Contains(got, "mount-visibility") || strings.Contains(got, "perm ") {
				t.Errorf("shared layers: %s", got)
			}
		})
	}
}

func TestCheckPolicyOnlyClasses(t *testing.T) {
	f := newCheckFixture(t)
	for _, tt := range []struct {
		obj  string
		perm Permission
		want bool
	}{
		{"network:default", PermConnect, true},
		{"agent:review-1", PermCreate, true},
		{"agent:review-1", PermStart, false},
		{"agent:review-2", PermCreate, false},
		{"session:s1", PermResume, true},
		{"session:s1", PermWrite, false},
		{"model:main", PermUse, true},
		{"model:helper", PermUse, false},
		{"mount:data", PermRead, false},
	} {
		obj, err := ParseObject(tt.obj)
		if err != nil {
			t.Fatal(err)
		}
		d := Check(f.agent, View{}, obj, tt.perm, Facts{})
		if d.Allowed != tt.want || len(d.Verdicts) != 1 || d.Verdicts[0].Layer != LayerAgentPolicy {
			t.Errorf("%s %s: %+v", tt.obj, tt.perm, d)
		}
		if !tt.want && d.Errno != syscall.EACCES {
			t.Errorf("%s %s: errno %v", tt.obj, tt.perm, d.Errno)
		}
	}
}

func TestCheckMalformedRequestIsEINVAL(t *testing.T) {
	f := newCheckFixture(t)
	for _, tt := range []struct {
		obj  Object
		perm Permission
	}{
		{Object{ClassTool, "fs.read"}, PermRead},
		{Object{0, "x"}, PermRead},
		{Object{Class(99), "x"}, PermRead},
		{Object{ClassAgent, "*"}, PermCreate},
		{Object{ClassNetwork, "lan"}, PermConnect},
		{Object{ClassTool, "fs.read"}, Permission(0)},
	} {
		d := Check(f.agent, f.view, tt.obj, tt.perm, f.facts)
		if d.Allowed || d.Errno != syscall.EINVAL || d.Layer != LayerRequest {
			t.Errorf("%v %v: %+v", tt.obj, tt.perm, d)
		}
	}
}
