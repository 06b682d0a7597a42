package policy

import (
	"path"
	"strings"
)

// View is an agent's mount view as plain data: the mounts of its sandbox in
// the order they are applied. Later entries are mounted on top of earlier
// ones, so an entry shadows whatever an earlier entry shows at or below its
// target.
type View struct {
	Mounts []Mount
}

// View returns the agent's mount view: the caller's implicit entries (the
// system directories, /ctx, /workspace... that the sandbox plan adds) first,
// then the agent's mount control, so an explicit entry wins over an implicit
// one at the same target.
func (a *Agent) View(implicit []Mount) View {
	m := make([]Mount, 0, len(implicit)+len(a.Mounts))
	m = append(m, implicit...)
	m = append(m, a.Mounts...)
	return View{Mounts: m}
}

// Location is where a host path appears inside a sandbox.
type Location struct {
	SandboxPath string
	Mount       Mount // the entry that shows it there
}

// Within reports whether p is dir or below it. Both are canonical absolute
// paths. This is a path comparison, never a string-prefix one: /root2 is
// not within /root.
func Within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// WithinAny reports whether p is one of dirs or below one.
func WithinAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if Within(p, d) {
			return true
		}
	}
	return false
}

// Rebase maps p, which is within from, to the same place under to.
func Rebase(p, from, to string) string {
	rel := strings.TrimPrefix(p[len(from):], "/")
	if from == "/" {
		rel = p[1:]
	}
	if rel == "" {
		return to
	}
	if to == "/" {
		return "/" + rel
	}
	return to + "/" + rel
}

// serving returns the index of the entry that serves sandbox path sp: the
// one with the longest target at or above sp, the latest on a tie (it was
// mounted last, on top). -1 when no entry covers sp.
func (v View) serving(sp string) int {
	best := -1
	for i, m := range v.Mounts {
		if Within(sp, m.Target) && (best < 0 || len(m.Target) >= len(v.Mounts[best].Target)) {
			best = i
		}
	}
	return best
}

// Locate finds where host path hostPath is visible in the sandbox. Among
// the entries whose source holds hostPath, the longest source wins; an
// entry whose view of hostPath is shadowed by a later or deeper mount does
// not count, and the next-longest is tried. hostPath is cleaned first; a
// relative path is never visible.
func (v View) Locate(hostPath string) (Location, bool) {
	if !path.IsAbs(hostPath) {
		return Location{}, false
	}
	hostPath = path.Clean(hostPath)
	tried := make([]bool, len(v.Mounts))
	for {
		cand := -1
		for i, m := range v.Mounts {
			if tried[i] || !Within(hostPath, m.Source) {
				continue
			}
			if cand < 0 || len(m.Source) >= len(v.Mounts[cand].Source) {
				cand = i
			}
		}
		if cand < 0 {
			return Location{}, false
		}
		tried[cand] = true
		m := v.Mounts[cand]
		sp := Rebase(hostPath, m.Source, m.Target)
		s := v.serving(sp)
		// The path is visible through cand when the entry on top at sp maps
		// it back to the same host path (usually s == cand; a second entry
		// binding the same source shows the same file too).
		if s >= 0 && Within(sp, v.Mounts[s].Target) && Rebase(sp, v.Mounts[s].Target, v.Mounts[s].Source) == hostPath {
			return Location{SandboxPath: sp, Mount: v.Mounts[s]}, true
		}
	}
}
