package sandboxplan

import (
	"strings"
	"testing"

	"ctx/policy"
)

// templatePlan is a uid-mode plan with the template marked: system
// directories, shared spaces, a mount line, a --mount entry, skills, tools,
// protected paths in the workspace.
func templatePlan(t *testing.T, template bool) *Plan {
	t.Helper()
	home := "/ctx/home/1000/agent/coder"
	a := mustAgent(t, "coder", withControls(coderControls(), "mount", "/srv/data\t/data\tro\t-\n"))
	in := PlanInput{Agent: a, Iso: "uid", RootDir: "/ctx", NewRoot: home + "/root", Template: template,
		SystemDirs: []HostDir{{Path: "/usr"}, {Path: "/bin", Symlink: "usr/bin"}},
		Etc:        []HostEtc{{Name: "ld.so.cache"}, {Name: "ssl", Dir: true}, {Name: "resolv.conf", Data: []byte("nameserver 1.1.1.1\n")}},
		Workspace:  "/home/me/project", WorkspaceIDMap: &IDMap{}, AgentHome: home, ProcDir: "/run/ctx/run/x", Argv: []string{"true"},
		SkillsDir: home + "/skills", Skills: []Skill{{Name: "review", HostDir: home + "/skills/review"}},
		Shared:  []SharedGrant{{Space: "proj", HostDir: "/ctx/shared/proj", Write: true}},
		Extra:   []policy.Mount{{Source: "/home/me/notes", Target: "/notes"}},
		Protect: &WorkspaceProtect{Paths: []string{".git"}},
		Tools:   []ProjectedTool{{Name: "fs.read", Tier: "/ctx/tool", HostPath: "/ctx/tool/fs.read", HostDotD: "/ctx/tool/fs.read.d", Schema: []byte(`{}`)}}}
	p, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTemplateMarks: what a kept template may hold is marked, and nothing
// that differs between runs or that a run may change: the run's own
// directory, the workspace and its protected paths, the mount lines and
// --mount entries, the rbinds (system directories, directories of /etc),
// /proc and its masks,
// the writable tmpfs mounts (/tmp, /dev/shm), /dev/pts, the loopback, the
// pivot and the root's read-only remount after it.
func TestTemplateMarks(t *testing.T) {
	p := templatePlan(t, true)
	in, out := map[string]bool{}, map[string]bool{}
	for _, op := range p.Ops {
		key := string(op.Kind) + " " + op.Target
		if op.Template {
			in[key] = true
		} else {
			out[key] = true
		}
	}
	for _, k := range []string{"symlink /bin", "tmpfs /etc", "bind /etc/ld.so.cache", "readonly /etc",
		"tmpfs /dev", "bind /dev/null", "readonly /dev", "tmpfs /ctx", "bind /ctx/bin", "bind /ctx/agent/coder.d",
		"bind /ctx/shared/proj", "tmpfs /ctx/tool", "bind /ctx/tool/fs.read", "bind /ctx/tool/fs.read.d", "readonly /ctx/tool",
		"readonly /ctx", "tmpfs /mnt", "bind /mnt/skills/review", "readonly /mnt", "bind /home/agent", "bind /home/agent/skills"} {
		if !in[k] {
			t.Errorf("%s: not in the template", k)
		}
	}
	for _, k := range []string{"bind /usr", "bind /etc/ssl", "devpts /dev/pts", "tmpfs /dev/shm", "proc /proc", "mask /proc/kcore", "protect /proc/sys",
		"tmpfs /tmp", "bind /mnt/proc", "bind /workspace", "protectpath /workspace/.git", "bind /data", "bind /notes",
		"loopback ", "pivotroot ", "readonly /"} {
		if !out[k] {
			t.Errorf("%s: in the template (or missing)", k)
		}
	}
	// The mount points the template holds for the run's own mounts: those
	// on its tmpfs mounts, not those beneath another of the run's mounts.
	var points []string
	for _, i := range TemplateMountPoints(p.Ops) {
		points = append(points, p.Ops[i].Target)
	}
	if got, want := strings.Join(points, " "), "/usr /etc/ssl /dev/pts /dev/shm /proc /tmp /mnt/proc /workspace /data /notes"; got != want {
		t.Errorf("template mount points %q, want %q", got, want)
	}
	// Without the input's Template, nothing is marked.
	if templatePlan(t, false).HasTemplate() {
		t.Error("a plan without Template has template marks")
	}
}

// TestTemplateValidate: a plan that marks for the template what a template
// must not hold is refused before anything is mounted: the per-run
// filesystems, a writable tmpfs, an rbind, anything beneath a run's own
// mount, anything after the pivot.
func TestTemplateValidate(t *testing.T) {
	for name, mark := range map[string]string{
		"proc":           "proc /proc",
		"mask":           "mask /proc/kcore",
		"writable tmpfs": "tmpfs /tmp",
		"rbind":          "bind /usr",
		"idmapped":       "bind /workspace",
		"beneath run":    "protectpath /workspace/.git",
		"devpts":         "devpts /dev/pts",
		"after pivot":    "readonly /",
		"loopback":       "loopback ",
	} {
		p := templatePlan(t, true)
		found := false
		for i, op := range p.Ops {
			if string(op.Kind)+" "+op.Target == mark {
				p.Ops[i].Template, found = true, true
			}
		}
		if !found {
			t.Fatalf("%s: no op %q", name, mark)
		}
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "marked for the template") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A marked tmpfs whose read-only op is not marked stays writable.
	p := templatePlan(t, true)
	for i, op := range p.Ops {
		if op.Kind == OpReadOnly && op.Target == "/etc" {
			p.Ops[i].Template = false
		}
	}
	if err := p.Validate(); err == nil {
		t.Error("a marked tmpfs left writable was accepted")
	}
}
