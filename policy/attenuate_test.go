package policy

import (
	"errors"
	"syscall"
	"testing"
)

func parentControls() map[string][]byte {
	return map[string][]byte{
		"label":  []byte("user_u:agent_r:parent_t:s0\n"),
		"perm":   []byte("r-x\n"),
		"uid":    []byte("1000\n"),
		"gid":    []byte("1000\n"),
		"groups": []byte("50\n60\n"),
		"policy": []byte("allow parent_t tool:fs.read execute\nallow parent_t tool:agent.create execute\n" +
			"allow parent_t agent:review-1 create\nallow parent_t shared:proj read\nallow helper_t tool:fs.list execute\n"),
		"mount": []byte("/srv/p\t/work\trw\tbind,nosuid\n/srv/ro\t/ro\tro\trbind,nodev,noexec\n/srv/r\t/r\trw\trbind\n"),
		"path":  []byte("/ctx/tool\n/ctx/home/1000/tool\n/ctx/shared/proj/tool\n"),
	}
}

// childControls is a child that attenuates parentControls correctly: the
// parent's subject (its label differs only in the level).
func childControls() map[string][]byte {
	return map[string][]byte{
		"label":  []byte("user_u:agent_r:parent_t:s1\n"),
		"perm":   []byte("r--\n"),
		"uid":    []byte("1000\n"),
		"gid":    []byte("50\n"),
		"groups": []byte("60\n1000\n"),
		"policy": []byte("allow parent_t tool:fs.read execute\nallow parent_t shared:proj read\nallow helper_t tool:fs.list execute\n"),
		"mount":  []byte("/srv/p\t/work\tro\tbind,nosuid,nodev\n/srv/ro\t/ro\tro\tbind,nodev,noexec\n"),
		"path":   []byte("/ctx/tool\n/ctx/shared/proj/tool\n"),
	}
}

func mustAgent(t *testing.T, name string, c map[string][]byte) *Agent {
	t.Helper()
	a, err := ParseAgent(name, c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAttenuateAccepts(t *testing.T) {
	parent := mustAgent(t, "parent", parentControls())
	if err := Attenuate(parent, mustAgent(t, "review-1", childControls())); err != nil {
		t.Fatal(err)
	}
	// A child identical to its parent is not a widening.
	if err := Attenuate(parent, mustAgent(t, "twin", parentControls())); err != nil {
		t.Fatalf("identical child: %v", err)
	}
	// An empty child (no rules, no mounts, no groups, no tools) is fine.
	empty := withControls(childControls(), "policy", "", "mount", "", "groups", "", "path", "", "perm", "---\n")
	if err := Attenuate(parent, mustAgent(t, "empty", empty)); err != nil {
		t.Fatalf("empty child: %v", err)
	}
}

func TestAttenuateRefusesEachWidening(t *testing.T) {
	tests := []struct {
		name    string
		kv      []string
		control string
	}{
		{"another agent's subject", []string{"label", "helper_t\n"}, "label"},
		{"another agent's subject, no rules", []string{"label", "user_u:agent_r:helper_t:s0\n", "policy", ""}, "label"},
		{"a subject of its own", []string{"label", "review_t\n", "policy", "allow review_t tool:fs.read execute\n"}, "label"},
		{"rule the parent lacks", []string{"policy", "allow parent_t tool:shell.exec execute\n"}, "policy"},
		{"same object, other permission", []string{"policy", "allow parent_t shared:proj write\n"}, "policy"},
		{"create another child", []string{"policy", "allow parent_t agent:review-2 create\n"}, "policy"},
		{"network", []string{"policy", "allow parent_t network:default connect\n"}, "policy"},
		{"foreign subject the parent lacks", []string{"policy", "allow other_t tool:fs.read execute\n"}, "policy"},
		{"parent subject rule the parent lacks", []string{"policy", "allow parent_t tool:fs.write execute\n"}, "policy"},
		{"perm adds w", []string{"perm", "rw-\n"}, "perm"},
		{"perm adds w though drops x", []string{"perm", "-w-\n"}, "perm"},
		{"other uid", []string{"uid", "1001\n"}, "uid"},
		{"root uid", []string{"uid", "0\n"}, "uid"},
		{"other gid", []string{"gid", "70\n"}, "gid"},
		{"extra group", []string{"groups", "60\n70\n"}, "groups"},
		{"root group", []string{"groups", "0\n"}, "groups"},
		{"ro to rw", []string{"mount", "/srv/ro\t/ro\trw\tbind,nodev,noexec\n"}, "mount"},
		{"drops nosuid", []string{"mount", "/srv/p\t/work\tro\tbind\n"}, "mount"},
		{"drops nodev", []string{"mount", "/srv/ro\t/ro\tro\tbind,noexec\n"}, "mount"},
		{"drops noexec", []string{"mount", "/srv/ro\t/ro\tro\tbind,nodev\n"}, "mount"},
		{"bind to rbind", []string{"mount", "/srv/p\t/work\trw\trbind,nosuid\n"}, "mount"},
		{"hidden to visible", []string{"mount", "/etc\t/etc\tro\t-\n"}, "mount"},
		{"same source, other target", []string{"mount", "/srv/p\t/elsewhere\tro\tbind,nosuid\n"}, "mount"},
		{"same target, other source", []string{"mount", "/srv\t/work\tro\tbind,nosuid\n"}, "mount"},
		{"subdirectory of a parent mount", []string{"mount", "/srv/p/sub\t/work/sub\tro\tbind,nosuid\n"}, "mount"},
		{"path adds a tier", []string{"path", "/ctx/tool\n/tmp/evil\n"}, "path"},
		{"path reorders", []string{"path", "/ctx/shared/proj/tool\n/ctx/tool\n"}, "path"},
		{"default path of another uid", []string{"path", "/ctx/home/1001/tool\n"}, "path"},
	}
	parent := mustAgent(t, "parent", parentControls())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := mustAgent(t, "review-1", withControls(childControls(), tt.kv...))
			err := Attenuate(parent, child)
			var ae *AttenuationError
			if !errors.As(err, &ae) || ae.Control != tt.control {
				t.Fatalf("got %v, want a widening of %s", err, tt.control)
			}
			if !errors.Is(err, syscall.EACCES) {
				t.Errorf("%v does not unwrap to EACCES", err)
			}
		})
	}
}

func TestAttenuateDefaultPaths(t *testing.T) {
	// Neither has a path control: both use the default for uid 1000.
	p := withControls(parentControls())
	delete(p, "path")
	c := withControls(childControls())
	delete(c, "path")
	if err := Attenuate(mustAgent(t, "p", p), mustAgent(t, "c", c)); err != nil {
		t.Fatal(err)
	}
}
