package fsops

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestAgentNames: only directories agent/NAME.d with a valid NAME are
// agents; a file of that name, an invalid name and other entries are not.
func TestAgentNames(t *testing.T) {
	r := Root{Dir: t.TempDir()}
	if names, err := r.AgentNames(); names != nil || !os.IsNotExist(err) {
		t.Fatalf("no agent dir: %v, %v", names, err)
	}
	for _, d := range []string{"b.d", "a.d", "-bad.d", "plain"} {
		if err := os.MkdirAll(filepath.Join(r.AgentDir(), d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(r.AgentDir(), "file.d"), nil, 0o644)
	names, err := r.AgentNames()
	if err != nil || !reflect.DeepEqual(names, []string{"a", "b"}) {
		t.Fatalf("AgentNames() = %q, %v", names, err)
	}
}
