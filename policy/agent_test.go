package policy

import (
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// coderControls is a complete, valid agent definition; tests copy and edit it.
func coderControls() map[string][]byte {
	return map[string][]byte{
		"label":  []byte("user_u:agent_r:coder_t:s0\n"),
		"perm":   []byte("rwx\n"),
		"uid":    []byte("1000\n"),
		"gid":    []byte("1000\n"),
		"policy": []byte("allow coder_t tool:fs.read execute\nallow coder_t tool:shell.exec execute\n"),
	}
}

func withControls(base map[string][]byte, kv ...string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = []byte(kv[i+1])
	}
	return out
}

func TestParseAgentDefaults(t *testing.T) {
	a, err := ParseAgent("coder", coderControls())
	if err != nil {
		t.Fatal(err)
	}
	want := &Agent{
		Name: "coder", Label: "user_u:agent_r:coder_t:s0", Subject: "coder_t", Ceiling: CeilingAll,
		Owner: 1000, UID: 1000, GID: 1000, Life: LifeOwned,
		Path:   []string{"/ctx/tool", "/ctx/home/1000/tool"},
		Window: Window{Auto: true}, Approval: ApprovalAuto, ABI: ABIArgv,
		Budgets: DefaultBudgets(),
		Policy:  a.Policy,
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("got  %+v\nwant %+v", a, want)
	}
	if a.Policy.Len() != 2 {
		t.Errorf("policy has %d rules", a.Policy.Len())
	}
	if a.Isolation(0) != IsoAuto || a.Isolation(1000) != IsoAuto {
		t.Errorf("default isolation: root %s, user %s", a.Isolation(0), a.Isolation(1000))
	}
}

// TestChooseIso: auto takes the strongest mode that works here, never
// shared; an explicit mode that cannot work is an error naming why and what
// would.
func TestChooseIso(t *testing.T) {
	full := HostIsolation{Userns: true, MountNS: true, RootIsMount: true, Landlock: 7}
	chroot := HostIsolation{UsernsWhy: "EPERM", MountNS: true, RootIsMount: false, Landlock: 7}
	bare := HostIsolation{UsernsWhy: "EPERM", MountNSWhy: "EPERM", RootIsMount: true, LandlockWhy: "ENOSYS"}
	for _, c := range []struct {
		req    Iso
		caller uint32
		h      HostIsolation
		want   Iso
		err    string
	}{
		{IsoAuto, 0, full, IsoUID, ""},
		{IsoAuto, 1000, full, IsoUserns, ""},
		{IsoUserns, 0, full, IsoUID, ""},
		{IsoAuto, 0, chroot, IsoUID, ""}, // the new root moved over / and chrooted into
		{IsoUID, 0, chroot, IsoUID, ""},
		{IsoAuto, 1000, chroot, IsoLandlock, ""},
		{IsoUserns, 1000, chroot, "", "not a mount point"},
		{IsoUID, 1000, full, "", "needs root"},
		{IsoLandlock, 1000, full, IsoLandlock, ""},
		{IsoLandlock, 1000, bare, "", "Landlock is not available"},
		{IsoAuto, 1000, bare, "", "no isolation works here"},
		{IsoShared, 1000, bare, IsoShared, ""},
	} {
		got, err := ChooseIso(c.req, c.caller, c.h)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ChooseIso(%s, %d, %+v) = %q, %v; want %q, %q", c.req, c.caller, c.h, got, err, c.want, c.err)
		}
	}
}

func TestParseAgentEveryControl(t *testing.T) {
	c := withControls(coderControls(),
		"owner", "0\n",
		"groups", "27\n100\n",
		"iso", "shared\n",
		"life", "temp\n",
		"parent", "agent:architect session:default run:ctx-1\n",
		"env", "EDITOR=vi\n",
		"path", "/ctx/tool\n",
		"tools", "fs.read\n",
		"window", "4096\n",
		"approval", "ask\n",
		"abi", "sdk-envelope-v1\n",
		"model", "openai/gpt-5.6\n",
		"mount", "/srv/p\t/work\trw\trbind,nosuid,nodev\n",
		"root", "/ctx/home/1000/agent/coder/root\n",
		"cwd", "/workspace/src\n",
		"status", "garbage that is not a control ParseAgent reads\n",
	)
	a, err := ParseAgent("coder", c)
	if err != nil {
		t.Fatal(err)
	}
	if a.Owner != 0 || !reflect.DeepEqual(a.Groups, []uint32{27, 100}) || a.Iso != IsoShared || a.Life != LifeTemp ||
		a.Parent != (Parent{"architect", "default", "ctx-1"}) || !reflect.DeepEqual(a.Env, []EnvVar{{"EDITOR", "vi"}}) ||
		!reflect.DeepEqual(a.Path, []string{"/ctx/tool"}) || !reflect.DeepEqual(a.Tools, []string{"fs.read"}) ||
		a.Window != (Window{Tokens: 4096}) || a.Approval != ApprovalAsk || a.ABI != ABISDKEnvelope ||
		a.Model != "openai/gpt-5.6" || len(a.Mounts) != 1 || a.Isolation(0) != IsoShared ||
		a.Root != "/ctx/home/1000/agent/coder/root" || a.Cwd != "/workspace/src" {
		t.Errorf("parsed %+v", a)
	}
	// Every known control name is in AgentControlNames exactly once.
	seen := map[string]bool{}
	for _, n := range AgentControlNames {
		if seen[n] {
			t.Errorf("%s listed twice", n)
		}
		seen[n] = true
	}
	for n := range c {
		if n != "status" && !seen[n] {
			t.Errorf("control %s missing from AgentControlNames", n)
		}
	}
}

func TestParseAgentEmptyPathMeansNoTools(t *testing.T) {
	a, err := ParseAgent("coder", withControls(coderControls(), "path", ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Path) != 0 {
		t.Errorf("empty path control gave %q", a.Path)
	}
}

func TestParseAgentRefusals(t *testing.T) {
	for _, required := range RequiredControls {
		c := coderControls()
		delete(c, required)
		_, err := ParseAgent("coder", c)
		var ce *ControlError
		if !errors.As(err, &ce) || ce.Control != required || ce.Kind != KindMissing {
			t.Errorf("without %s: %v", required, err)
		}
	}
	tests := []struct {
		name    string
		agent   string
		control string
		data    string
	}{
		{"bad name", "../x", "agent", ""},
		{"name 65", name65, "agent", ""},
		{"bad label", "coder", "label", "a:b\n"},
		{"bad perm", "coder", "perm", "rwxrwx\n"},
		{"bad policy", "coder", "policy", "# no comments\n"},
		{"bad mount", "coder", "mount", "/a\t/b\tro\tbind,rbind\n"},
		{"bad env", "coder", "env", "CTX_AGENT=other\n"},
		{"bad tools", "coder", "tools", "tsh\n"},
		{"bad owner", "coder", "owner", "-1\n"},
		{"relative cwd", "coder", "cwd", "work\n"},
		{"root with ..", "coder", "root", "/ctx/../etc\n"},
	}
	for _, tt := range tests {
		c := coderControls()
		if tt.control != "agent" {
			c[tt.control] = []byte(tt.data)
		}
		a, err := ParseAgent(tt.agent, c)
		var ce *ControlError
		if !errors.As(err, &ce) || ce.Control != tt.control || !errors.Is(err, syscall.EINVAL) || a != nil {
			t.Errorf("%s: %v (agent %v)", tt.name, err, a)
		}
	}
}

func TestAgentControlsRoundTrip(t *testing.T) {
	for _, c := range []map[string][]byte{
		coderControls(),
		withControls(coderControls(), "owner", "0\n", "groups", "27\n", "iso", "userns\n", "parent", "agent:a run:r\n",
			"env", "A=1\nB= x \n", "path", "/x\n/ctx/tool\n", "tools", "fs.read\nfs.list\n", "window", "9\n",
			"approval", "ask\n", "model", "main\n", "root", "/r\n", "cwd", "/w\n", "mount", "/a\t/b\tro\tnoexec,bind\n/c\t/d\trw\t-\n",
			"protect", "!**/.idea\nMakefile\n"),
	} {
		a, err := ParseAgent("x", c)
		if err != nil {
			t.Fatal(err)
		}
		rendered := a.Controls()
		b, err := ParseAgent("x", rendered)
		if err != nil {
			t.Fatalf("re-parsing rendered controls: %v", err)
		}
		if !reflect.DeepEqual(a.Controls(), b.Controls()) || !reflect.DeepEqual(a.Policy.Rules(), b.Policy.Rules()) {
			t.Errorf("round trip changed the agent:\n%+v\n%+v", a, b)
		}
		a.Policy, b.Policy = nil, nil
		if !reflect.DeepEqual(a, b) {
			t.Errorf("round trip changed the agent:\n%+v\n%+v", a, b)
		}
		// Canonical input renders to itself.
		again := b
		again.Policy, _ = ParsePolicy(rendered["policy"])
		for k, v := range again.Controls() {
			if string(rendered[k]) != string(v) {
				t.Errorf("control %s: %q then %q", k, rendered[k], v)
			}
		}
	}
}
