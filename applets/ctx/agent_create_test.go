package ctx

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/runhost"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/policy/schema"
)

// seedCreateExample is the seed's agent.create "Example request", verbatim.
const seedCreateExample = `{
  "name": "reviewer",
  "label": "reviewer_t",
  "model": ["openai/gpt-5.6"],
  "tools": ["fs.read"],
  "shared": {
    "project-a": ["read"]
  },
  "mount": [
    ["/work", "/work", "ro"],
    ["/shared/project-a", "/shared/project-a", "ro"]
  ]
}`

// createBroker is the run host's broker of a run of agent name, as far as
// agent.create needs it (its tree, its agent, its session files).
func createBroker(t *testing.T, root, name string) *runhost.Broker {
	t.Helper()
	a, err := authority.LoadAgent(fsops.Root{Dir: root}, name)
	if err != nil {
		t.Fatal(err)
	}
	r := &runhost.AgentRun{Root: fsops.Root{Dir: root}, Agent: a, Session: "s1", RunID: "r1",
		Sess: fsops.SessionFiles{Events: filepath.Join(t.TempDir(), "events.jsonl")}}
	return &runhost.Broker{R: r}
}

// TestAgentCreateSeedExample sends the seed's own example request. The
// schema takes its shape (shared as an object, mounts as triples, model as
// a list); rule 13 still holds: from coder (coder_t) the label reviewer_t
// is another subject and nothing is written; from a parent whose subject
// is reviewer_t the very same request creates the child.
func TestAgentCreateSeedExample(t *testing.T) {
	compiled, err := schema.Compile([]byte(runhost.AgentCreateTool.Schema))
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := toolrun.DecodeInputObject([]byte(seedCreateExample))
	if err != nil {
		t.Fatal(err)
	}
	if err := compiled.Validate(in); err != nil {
		t.Fatalf("the seed's example is refused by agent.create's schema: %v", err)
	}
	root := filepath.Join(t.TempDir(), "ctx")
	if code, out, errs := runIn(t, RunBootstrap, "--root", root); code != 0 {
		t.Fatalf("bootstrap: %d\n%s%s", code, out, errs)
	}
	// ATTACK: coder asks for a child under another subject.
	os.WriteFile(filepath.Join(root, "agent", "coder.d", "policy"), []byte("allow coder_t agent:reviewer create\nallow coder_t tool:fs.read execute\n"), 0o644)
	before := snapshot(t, filepath.Join(root, "agent"))
	reply := createBroker(t, root, "coder").AgentCreate([]byte(seedCreateExample))
	if reply.Exit != cli.Denied || !strings.Contains(reply.Error, "child widens label: subject reviewer_t is not the parent's coder_t") {
		t.Fatalf("coder's child under reviewer_t: exit %d %q, want 13 child widens label", reply.Exit, reply.Error)
	}
	if after := snapshot(t, filepath.Join(root, "agent")); after != before {
		t.Fatal("a refused agent.create changed agent/")
	}

	// The example as it is meant: its parent holds reviewer_t and every
	// grant and mount the example asks for.
	code, out, errs := runIn(t, RunAgentNew, "--root", root, "lead", "--label", "reviewer_t", "--tool", "fs.read",
		"--shared", "project-a:read", "--mount", "/work", "/work", "ro", "--mount", "/shared/project-a", "/shared/project-a", "ro")
	if code != 0 {
		t.Fatalf("agent new lead: %d\n%s%s", code, out, errs)
	}
	f, _ := os.OpenFile(filepath.Join(root, "agent", "lead.d", "policy"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("allow reviewer_t agent:reviewer create\n")
	f.Close()
	reply = createBroker(t, root, "lead").AgentCreate([]byte(seedCreateExample))
	if reply.Exit != 0 {
		t.Fatalf("the seed example from a reviewer_t parent: exit %d %s", reply.Exit, reply.Error)
	}
	child, err := authority.LoadAgent(fsops.Root{Dir: root}, "reviewer")
	if err != nil {
		t.Fatal(err)
	}
	pol := string(child.Policy.Format())
	if child.Subject != "reviewer_t" || child.Model != "openai/gpt-5.6" || len(child.Mounts) != 2 ||
		!strings.Contains(pol, "allow reviewer_t shared:project-a read") || strings.Contains(pol, "shared:project-a write") ||
		!strings.Contains(pol, "allow reviewer_t tool:fs.read execute") || !child.Mounts[0].ReadOnly {
		t.Fatalf("child: subject %s model %s mounts %v policy\n%s", child.Subject, child.Model, child.Mounts, pol)
	}
}

// TestAgentCreateShapesRefused: a bad value in either shape is a usage
// error naming what was wrong.
func TestAgentCreateShapesRefused(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"name":"k","shared":{"p":["exec"]}}`, `permission "exec"`},
		{`{"name":"k","shared":{"p":[]}}`, "names no permission"},
		{`{"name":"k","model":["a","b"]}`, "exactly one model"},
		{`{"name":"k","mount":[["/a","/b"]]}`, "mount[0]"},
		{`{"name":"k","mount":[["/a","/b","rx"]]}`, `mode "rx"`},
		{`{"name":"k","mount":[{"source":"/a","target":"/b","mode":"ro","x":1}]}`, "unknown field"},
	} {
		if _, err := runhost.DecodeCreateRequest([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
}

// FuzzAgentCreateRequest: any input decodes or is refused, never panics,
// and every mount it yields is a SRC DST ro|rw triple.
func FuzzAgentCreateRequest(f *testing.F) {
	f.Add([]byte(seedCreateExample))
	f.Add([]byte(`{"name":"k","shared":["p:write"],"mount":[{"source":"/a","target":"/b","mode":"rw"}],"model":"m"}`))
	f.Add([]byte(`{"name":"k","shared":{"p":["write","read"],"q":["read"]},"model":[]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := runhost.DecodeCreateRequest(in)
		if err != nil || !bytes.HasPrefix(bytes.TrimSpace(in), []byte("{")) {
			return
		}
		for _, m := range req.Mounts {
			if len(m) != 3 || (m[2] != "ro" && m[2] != "rw") {
				t.Fatalf("mount %q from %q", m, in)
			}
		}
	})
}
