package protectsearch

import "testing"

func TestWalkSkipsOtherMounts(t *testing.T) {
	g := &Search{Workspace: "/w", Mounts: map[string]bool{"/w/m": true, "/w/a/b": true}}
	for rel, want := range map[string]bool{"m": false, "m/x/.git": false, "mm": true, "a": true, "a/b": false, "a/b/c": false, "a/bc": true} {
		if got := g.sameMount(rel); got != want {
			t.Errorf("%s: %v", rel, got)
		}
	}
}
