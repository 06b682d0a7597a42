package protectsearch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// Bounds of the search for **/ entries: breadth first, so the projects
// nearest the top are found first; past a bound the run host says so in
// /mnt/proc/policy and on stderr.
const (
	MaxWalkDirs = 20000
	MaxPaths    = 1024
)

// A Search finds the protected paths of a workspace at the start of a run
// (DESIGN §16 rule 11): the protect control's patterns matched breadth
// first, never through a symlink, never into another mount. The run host
// fills the first fields, calls Walk, and reads the rest.
type Search struct {
	Workspace string // the canonical workspace on the host
	Set       []policy.ProtectPattern
	Table     []fsops.MountInfo // the host's mount table (nil: none could be read)
	// NoMounts: iso landlock or shared, where the agent sees the host's
	// paths, so a git directory is where the .git file leads on the host;
	// Shared: iso shared, where the agent reaches every path of its uid
	// anyway, so a .git file's git directory is protected wherever it is.
	NoMounts bool
	Shared   bool

	Mounts    map[string]bool           // mount points below the workspace: not in the sandbox
	Paths     []string                  // protected, relative to the workspace
	GitDirs   []sandboxplan.GitDirMount // outside the workspace
	Worktrees []string                  // sandbox paths of work trees whose git directory is outside
	Notes     []string
	Truncated bool
	Known     map[string]fsops.DirSketch // the directories listed, by path relative to the workspace
}

// Protected reports whether rel is a protected path or lies inside one.
func (g *Search) Protected(rel string) bool {
	for _, p := range g.Paths {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// Walk looks for every pattern at the top of the workspace and, for **/
// patterns, below every directory, breadth first. It never follows a
// symlink, never descends into a protected path, a .git directory or
// another mount (the workspace is bound without its submounts, so those
// are not in the sandbox). A directory costs one readdir: a pattern is
// looked at only when its first component is among the entries.
func (g *Search) Walk() error {
	anyDepth := false
	for _, p := range g.Set {
		anyDepth = anyDepth || p.AnyDepth
	}
	if g.Table != nil {
		g.Mounts = map[string]bool{}
		for _, m := range g.Table {
			if m.Target != g.Workspace && within(m.Target, g.Workspace) {
				g.Mounts[m.Target] = true
			}
		}
	}
	// Each listing is kept for the census the start takes next, which
	// walks the same directories (fsops.ProtectCensus.Known).
	g.Known = map[string]fsops.DirSketch{}
	wanted := fsops.ProtectWanted(g.Set)
	var scanner fsops.DirScanner
	queue := []string{""}
	for visited := 0; len(queue) > 0; visited++ {
		if visited >= MaxWalkDirs {
			g.Truncated = true
			return nil
		}
		dir := queue[0]
		queue = queue[1:]
		sk, _, mode, _ := scanner.Sketch(filepath.Join(g.Workspace, dir), wanted)
		if mode == 0 {
			continue // unreadable to the caller: not the agent's either
		}
		g.Known[dir] = sk
		for _, p := range g.Set {
			if dir != "" && !p.AnyDepth {
				continue
			}
			first, _, _ := strings.Cut(p.Path, "/")
			if !sk.Has(first) {
				continue
			}
			if err := g.match(filepath.Join(dir, p.Path)); err != nil {
				return err
			}
			if len(g.Paths) >= MaxPaths {
				g.Truncated = true
				return nil
			}
		}
		if !anyDepth {
			return nil
		}
		for _, name := range sk.Subdirs { // not a symlink, nor .git
			rel := filepath.Join(dir, name)
			if g.Protected(rel) || !g.sameMount(rel) {
				continue
			}
			queue = append(queue, rel)
		}
	}
	return nil
}

// sameMount reports whether rel is on the workspace's own mount: no mount
// point lies at or above it inside the workspace.
func (g *Search) sameMount(rel string) bool {
	for p := filepath.Join(g.Workspace, rel); p != g.Workspace && len(p) > len(g.Workspace); p = filepath.Dir(p) {
		if g.Mounts[p] {
			return false
		}
	}
	return true
}

// match protects rel when it exists: a symlink anywhere on the way refuses
// the start; a .git file brings its git directory.
func (g *Search) match(rel string) error {
	if g.Protected(rel) {
		return nil
	}
	host := filepath.Join(g.Workspace, rel)
	st, err := fsops.StatNoSymlinks(host)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return g.symlinkOnTheWay(rel)
		}
		return nil // absent (or unreadable to the caller, so not the agent's either)
	}
	if !g.sameMount(rel) {
		g.Notes = append(g.Notes, rel+" is on another mount, which the sandbox does not show")
		return nil
	}
	g.addPath(rel)
	if filepath.Base(rel) == ".git" && st.Mode&unix.S_IFMT == unix.S_IFREG {
		g.gitFile(rel)
	}
	return nil
}

// symlinkOnTheWay names the symlink that stands at or above rel.
func (g *Search) symlinkOnTheWay(rel string) error {
	cur := ""
	for _, c := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, c)
		st, err := os.Lstat(filepath.Join(g.Workspace, cur))
		if err == nil && st.Mode()&fs.ModeSymlink != 0 {
			to, _ := os.Readlink(filepath.Join(g.Workspace, cur))
			if cur == rel {
				return fmt.Errorf("protected path %s is a symlink (to %q)", rel, to)
			}
			return fmt.Errorf("protected path %s: %s is a symlink (to %q)", rel, cur, to)
		}
	}
	return fmt.Errorf("protected path %s: a symlink on the way", rel)
}

// addPath records rel as protected, dropping protected paths inside it.
func (g *Search) addPath(rel string) {
	if g.Protected(rel) {
		return
	}
	kept := g.Paths[:0]
	for _, p := range g.Paths {
		if !strings.HasPrefix(p, rel+"/") {
			kept = append(kept, p)
		}
	}
	g.Paths = append(kept, rel)
	sort.Strings(g.Paths)
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
