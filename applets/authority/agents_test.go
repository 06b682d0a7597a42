package authority

import (
	"os"
	"strings"
	"sync"
	"testing"

	"ctx/policy"
)

// TestAgentsReadOnce: a reading loads each agent once, whoever asks and
// however many ask at once, starts from the agents it was given, and the
// trust rule it serves decides on that reading, not on a later change.
func TestAgentsReadOnce(t *testing.T) {
	root := trustTree(t)
	a, err := LoadAgent(root, "architect")
	if err != nil {
		t.Fatal(err)
	}
	s := NewAgents(root, a)
	if got, err := s.Load("architect"); got != a || err != nil {
		t.Fatalf("Load(architect) = %p, %v; want the agent given, %p", got, err, a)
	}
	fresh, reading := TrustedToolDirs(root, a), s.TrustedToolDirs(a)
	if strings.Join(fresh.Dirs, ":") != strings.Join(reading.Dirs, ":") || len(fresh.Skipped) != 1 || len(reading.Skipped) != 1 {
		t.Fatalf("reading's tool path %+v, fresh %+v", reading, fresh)
	}

	var wg sync.WaitGroup
	got := make([]*policy.Agent, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = s.Load("coder")
		}()
	}
	wg.Wait()
	for i := range got {
		if got[i] == nil || got[i] != got[0] {
			t.Fatalf("concurrent loads of coder gave %p and %p", got[i], got[0])
		}
	}

	// Taking write away from coder trusts proj's tier for a fresh reading;
	// this one read coder before, and still sets the tier aside.
	os.WriteFile(root.Path("agent/coder.d/policy"), []byte("allow coder_t shared:proj read\n"), 0o644)
	if tp := TrustedToolDirs(root, a); len(tp.Skipped) != 0 {
		t.Fatalf("fresh reading skipped %+v", tp.Skipped)
	}
	if tp := s.TrustedToolDirs(a); len(tp.Skipped) != 1 {
		t.Fatalf("the reading took a later change: skipped %+v", tp.Skipped)
	}
	if _, err := s.Load("ghost"); err == nil {
		t.Fatal("Load(ghost) found an agent")
	}
}
