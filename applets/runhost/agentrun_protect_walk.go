package runhost

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

// The search for the protected paths of a workspace at the start of a
// run: the protect control's patterns matched breadth first, never
// through a symlink, never into another mount.

// protectGather is the search in progress.
type protectGather struct {
	ws        string          // the canonical workspace on the host
	mounts    map[string]bool // mount points below it: not in the sandbox
	set       []policy.ProtectPattern
	paths     []string                  // protected, relative to ws
	gitDirs   []sandboxplan.GitDirMount // outside the workspace
	worktrees []string                  // sandbox paths of work trees whose git directory is outside
	notes     []string
	truncated bool
	known     map[string]fsops.DirSketch // the directories listed, by path relative to ws
	table     []fsops.MountInfo          // the host's mount table (nil: none could be read)
	// noMounts: iso landlock or shared, where the agent sees the host's
	// paths, so a git directory is where the .git file leads on the host;
	// shared: iso shared, where the agent reaches every path of its uid
	// anyway, so a .git file's git directory is protected wherever it is.
	noMounts bool
	shared   bool
}

// protected reports whether rel is a protected path or lies inside one.
func (g *protectGather) protected(rel string) bool {
	for _, p := range g.paths {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// walk looks for every pattern at the top of the workspace and, for **/
// patterns, below every directory, breadth first. It never follows a
// symlink, never descends into a protected path, a .git directory or
// another mount (the workspace is bound without its submounts, so those
// are not in the sandbox). A directory costs one readdir: a pattern is
// looked at only when its first component is among the entries.
func (g *protectGather) walk() error {
	anyDepth := false
	for _, p := range g.set {
		anyDepth = anyDepth || p.AnyDepth
	}
	if g.table != nil {
		g.mounts = map[string]bool{}
		for _, m := range g.table {
			if m.Target != g.ws && within(m.Target, g.ws) {
				g.mounts[m.Target] = true
			}
		}
	}
	// Each listing is kept for the census the start takes next, which
	// walks the same directories (fsops.ProtectCensus.Known).
	g.known = map[string]fsops.DirSketch{}
	wanted := fsops.ProtectWanted(g.set)
	var scanner fsops.DirScanner
	queue := []string{""}
	for visited := 0; len(queue) > 0; visited++ {
		if visited >= maxProtectWalkDirs {
			g.truncated = true
			return nil
		}
		dir := queue[0]
		queue = queue[1:]
		sk, _, mode, _ := scanner.Sketch(filepath.Join(g.ws, dir), wanted)
		if mode == 0 {
			continue // unreadable to the caller: not the agent's either
		}
		g.known[dir] = sk
		for _, p := range g.set {
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
			if len(g.paths) >= maxProtectPaths {
				g.truncated = true
				return nil
			}
		}
		if !anyDepth {
			return nil
		}
		for _, name := range sk.Subdirs { // not a symlink, nor .git
			rel := filepath.Join(dir, name)
			if g.protected(rel) || !g.sameMount(rel) {
				continue
			}
			queue = append(queue, rel)
		}
	}
	return nil
}

// sameMount reports whether rel is on the workspace's own mount: no mount
// point lies at or above it inside the workspace.
func (g *protectGather) sameMount(rel string) bool {
	for p := filepath.Join(g.ws, rel); p != g.ws && len(p) > len(g.ws); p = filepath.Dir(p) {
		if g.mounts[p] {
			return false
		}
	}
	return true
}

// match protects rel when it exists: a symlink anywhere on the way refuses
// the start; a .git file brings its git directory.
func (g *protectGather) match(rel string) error {
	if g.protected(rel) {
		return nil
	}
	host := filepath.Join(g.ws, rel)
	st, err := fsops.StatNoSymlinks(host)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return g.symlinkOnTheWay(rel)
		}
		return nil // absent (or unreadable to the caller, so not the agent's either)
	}
	if !g.sameMount(rel) {
		g.notes = append(g.notes, rel+" is on another mount, which the sandbox does not show")
		return nil
	}
	g.addPath(rel)
	if filepath.Base(rel) == ".git" && st.Mode&unix.S_IFMT == unix.S_IFREG {
		g.gitFile(rel)
	}
	return nil
}

// symlinkOnTheWay names the symlink that stands at or above rel.
func (g *protectGather) symlinkOnTheWay(rel string) error {
	cur := ""
	for _, c := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, c)
		st, err := os.Lstat(filepath.Join(g.ws, cur))
		if err == nil && st.Mode()&fs.ModeSymlink != 0 {
			to, _ := os.Readlink(filepath.Join(g.ws, cur))
			if cur == rel {
				return fmt.Errorf("protected path %s is a symlink (to %q)", rel, to)
			}
			return fmt.Errorf("protected path %s: %s is a symlink (to %q)", rel, cur, to)
		}
	}
	return fmt.Errorf("protected path %s: a symlink on the way", rel)
}

// addPath records rel as protected, dropping protected paths inside it.
func (g *protectGather) addPath(rel string) {
	if g.protected(rel) {
		return
	}
	kept := g.paths[:0]
	for _, p := range g.paths {
		if !strings.HasPrefix(p, rel+"/") {
			kept = append(kept, p)
		}
	}
	g.paths = append(kept, rel)
	sort.Strings(g.paths)
}
