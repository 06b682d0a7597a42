package sandboxplan

import (
	"testing"

	"ctx/policy"
)

// TestLandlockPlanSockets: an iso landlock plan lets unix sockets be
// connected to (Landlock ABI 9; below it the run host's gate goes by the
// same rules) in its run directory, where the broker is, and in the
// places it may write, nowhere else: not the system directories, not the
// tree, not the home's read-only part. Without the network grant it makes
// unix sockets only.
func TestLandlockPlanSockets(t *testing.T) {
	home := "/ctx/home/1000/agent/coder"
	run := "/ctx/home/1000/agent/coder/run/x"
	in := PlanInput{Agent: mustAgent(t, "coder", coderControls()), Iso: string(policy.IsoLandlock), RootDir: "/ctx",
		Workspace: "/home/me/project", AgentHome: home, ProcDir: run, Argv: []string{"true"},
		SystemDirs: []HostDir{{Path: "/usr"}, {Path: "/bin"}}}
	p, err := BuildLandlockPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	connect := map[string]bool{}
	for _, a := range p.Access {
		if a.Connect {
			connect[a.Path] = true
			if !a.Write && a.Path != run {
				t.Errorf("%s: connect without write", a.Path)
			}
		}
	}
	for _, want := range []string{run, "/home/me/project", home + "/tmp", home + "/data"} {
		if !connect[want] {
			t.Errorf("%s: no connect right (%v)", want, connect)
		}
	}
	for _, not := range []string{"/usr", "/bin", "/ctx/bin", "/ctx/agent", home, "/proc", "/dev/null"} {
		if connect[not] {
			t.Errorf("%s: connect right", not)
		}
	}
	if !p.NoNetwork || !p.DenyTCP {
		t.Errorf("no network grant: NoNetwork %v, DenyTCP %v", p.NoNetwork, p.DenyTCP)
	}
	// Without perm w (r-x) nothing is the run's to write, so its sockets are
	// the broker's alone.
	in.Agent = mustAgent(t, "coder", withControls(coderControls(), "perm", "r-x\n"))
	if p, err = BuildLandlockPlan(in); err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Access {
		if a.Connect && a.Path != run {
			t.Errorf("perm r-x: %s has the connect right", a.Path)
		}
	}
	// The namespace modes: no network grant, unix sockets only there too
	// (a network namespace does not confine AF_VSOCK).
	in.Iso, in.NewRoot = string(policy.IsoUserns), home+"/root"
	ns, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if !ns.NoNetwork {
		t.Error("userns without the network grant: NoNetwork false")
	}
	in.Network = true
	if ns, err = BuildPlan(in); err != nil || ns.NoNetwork {
		t.Errorf("userns with the network grant: NoNetwork %v (%v)", ns.NoNetwork, err)
	}
}
