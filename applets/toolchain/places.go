package toolchain

import (
	"os"
	"path/filepath"
	"strings"

	"ctx/fsops"
	"ctx/policy"
)

// OthersWrite lists the host places where any agent of the tree may write
// or has written, besides the tree itself: every agent's writable mounts
// (mountsOf gives an agent's mount lines) and the workspace of every
// session in the tree, private or shared (the run host records each;
// the agent does not write that record). A link another agent planted
// there must not choose what a run of this one is shown.
func OthersWrite(root fsops.Root, mountsOf func(name string) []policy.Mount) []string {
	var places []string
	names, _ := root.AgentNames()
	for _, name := range names {
		for _, m := range mountsOf(name) {
			if !m.ReadOnly {
				places = append(places, m.Source)
			}
		}
	}
	for _, pattern := range []string{"home/*/agent/*/session/*/workspace", "shared/*/agent/*/session/*/workspace"} {
		files, _ := filepath.Glob(filepath.Join(root.Dir, pattern))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				if ws := strings.TrimSpace(string(b)); filepath.IsAbs(ws) {
					places = append(places, ws)
				}
			}
		}
	}
	return places
}
