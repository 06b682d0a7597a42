package applets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/policy"
)

// The census of a workspace's protected paths, taken at the start of a
// run and again at its end (DESIGN §16 rule 11): every path the protect
// patterns match, at any depth, flattened to the files and symlinks a host
// tool would load. A protected directory counts by what it holds; a git
// directory by what git loads or runs by itself (its config, commondir,
// hooks, and those of the submodules and worktrees it holds), never its
// objects or work tree. The start keeps the content of what it finds, in
// the run host's memory, so the end can put back what the run changed.

// Bounds of the census: past maxProtectItems paths it stops (and says
// so); content is kept up to maxProtectKeep bytes a file and
// maxProtectKeepAll in all.
const (
	maxProtectItems   = 20000
	maxProtectKeep    = 1 << 20
	maxProtectKeepAll = 32 << 20
	maxGitNesting     = 8
)

// protectItem is one protected file or symlink as the census found it.
type protectItem struct {
	st   unix.Stat_t
	link string
	orig *fsops.Original // the start's copy, nil when not kept
}

// same reports whether two looks found the same, unchanged object: any
// write, chmod, chown or rename changes its ctime.
func (a *protectItem) same(b *protectItem) bool {
	return a.st.Dev == b.st.Dev && a.st.Ino == b.st.Ino && a.st.Mode == b.st.Mode && a.st.Size == b.st.Size &&
		a.st.Mtim == b.st.Mtim && a.st.Ctim == b.st.Ctim && a.st.Uid == b.st.Uid && a.st.Gid == b.st.Gid && a.link == b.link
}

// protectCensus is one look at the workspace.
type protectCensus struct {
	ws        string
	set       []policy.ProtectPattern
	mounts    map[string]bool
	keep      bool // the start: keep content
	kept      int64
	items     map[string]*protectItem
	truncated bool
}

// takeCensus walks the whole workspace (no bound on directories: a new
// repository may be anywhere), never following a symlink, never into
// another mount (not in the sandbox) or a protected path (counted whole).
func takeCensus(ws string, set []policy.ProtectPattern, mounts map[string]bool, keep bool) *protectCensus {
	c := &protectCensus{ws: ws, set: set, mounts: mounts, keep: keep, items: map[string]*protectItem{}}
	anyDepth, bare := false, false
	for _, p := range set {
		anyDepth = anyDepth || p.AnyDepth
		bare = bare || p == policy.ProtectPattern{Path: ".git", AnyDepth: true}
	}
	stack := []string{""}
	for len(stack) > 0 && !c.truncated {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		entries := readNames(filepath.Join(ws, dir))
		if bare && entries["objects"] && entries["refs"] && hasName(entries, "HEAD") {
			// A git directory under another name (a bare repository):
			// git uses it, config and hooks, when started inside it.
			c.gitDir(dir, 0)
			continue
		}
		done := map[string]bool{}
		for _, p := range set {
			if dir != "" && !p.AnyDepth {
				continue
			}
			first, _, _ := strings.Cut(p.Path, "/")
			if _, ok := entries[first]; ok {
				c.matched(filepath.Join(dir, p.Path))
				done[filepath.Join(dir, p.Path)] = true
			}
		}
		if !anyDepth {
			break // the top-level patterns are all looked at
		}
		for name, isDir := range entries {
			rel := filepath.Join(dir, name)
			if isDir && !done[rel] && name != ".git" && c.sameMount(rel) {
				stack = append(stack, rel)
			}
		}
	}
	return c
}

func hasName(entries map[string]bool, name string) bool {
	_, ok := entries[name]
	return ok
}

// readNames lists dir without following a symlink at its end: each name
// and whether it is a directory (a symlink is not).
func readNames(dir string) map[string]bool {
	f, err := fsops.OpenDirNoFollow(dir)
	if err != nil {
		return nil // unreadable to the host: not the agent's either
	}
	defer f.Close()
	entries, _ := f.ReadDir(-1)
	out := make(map[string]bool, len(entries))
	for _, e := range entries {
		out[e.Name()] = e.IsDir()
	}
	return out
}

func (c *protectCensus) sameMount(rel string) bool {
	for p := filepath.Join(c.ws, rel); p != c.ws && len(p) > len(c.ws); p = filepath.Dir(p) {
		if c.mounts[p] {
			return false
		}
	}
	return true
}

// matched counts the protected path rel: a symlink (there or on the way)
// is counted itself, a git directory by what git loads, another
// directory by everything in it.
func (c *protectCensus) matched(rel string) {
	if !c.sameMount(rel) {
		return
	}
	st, err := fsops.StatNoSymlinks(filepath.Join(c.ws, rel))
	if errors.Is(err, unix.ELOOP) {
		c.symlinkOnTheWay(rel)
		return
	}
	if err != nil {
		return
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		c.add(rel)
	case filepath.Base(rel) == ".git":
		c.gitDir(rel, 0)
	default:
		c.tree(rel)
	}
}

// symlinkOnTheWay counts the first symlink at or above rel.
func (c *protectCensus) symlinkOnTheWay(rel string) {
	cur := ""
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		if st, err := fsops.Lstat(filepath.Join(c.ws, cur)); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			c.add(cur)
			return
		}
	}
}

// gitDir counts what git loads or runs from the git directory rel.
func (c *protectCensus) gitDir(rel string, depth int) {
	for _, n := range policy.GitWatched() {
		c.addIfPresent(filepath.Join(rel, n))
	}
	hooks := filepath.Join(rel, "hooks")
	if st, err := fsops.Lstat(filepath.Join(c.ws, hooks)); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			c.add(hooks)
		} else {
			for name, isDir := range readNames(filepath.Join(c.ws, hooks)) {
				if isDir {
					c.tree(filepath.Join(hooks, name))
				} else if policy.GitHookWatched(name) {
					c.add(filepath.Join(hooks, name))
				}
			}
		}
	}
	if depth >= maxGitNesting {
		return
	}
	for _, sub := range policy.GitSubDirs() {
		for name, isDir := range readNames(filepath.Join(c.ws, rel, sub)) {
			if isDir {
				c.gitDir(filepath.Join(rel, sub, name), depth+1)
			}
		}
	}
}

// tree counts every file and symlink below the directory rel.
func (c *protectCensus) tree(rel string) {
	for name, isDir := range readNames(filepath.Join(c.ws, rel)) {
		p := filepath.Join(rel, name)
		switch {
		case c.truncated:
			return
		case isDir && c.sameMount(p):
			c.tree(p)
		case !isDir:
			c.add(p)
		}
	}
}

func (c *protectCensus) addIfPresent(rel string) {
	if _, err := fsops.Lstat(filepath.Join(c.ws, rel)); err == nil {
		c.add(rel)
	}
}

// add records rel (a file or a symlink) and, at the start, keeps its
// content within the bounds.
func (c *protectCensus) add(rel string) {
	if len(c.items) >= maxProtectItems {
		c.truncated = true
		return
	}
	host := filepath.Join(c.ws, rel)
	st, err := fsops.Lstat(host)
	if err != nil {
		return
	}
	it := &protectItem{st: st}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		it.link, _ = os.Readlink(host)
		if c.keep {
			it.orig = &fsops.Original{Mode: st.Mode, UID: st.Uid, GID: st.Gid, Link: it.link}
		}
	case unix.S_IFREG:
		if c.keep && st.Size <= maxProtectKeep && c.kept+st.Size <= maxProtectKeepAll {
			if data, err := readKept(host, st); err == nil {
				c.kept += int64(len(data))
				it.orig = &fsops.Original{Mode: st.Mode, UID: st.Uid, GID: st.Gid, Data: data}
			}
		}
	}
	c.items[rel] = it
}

// readKept reads the regular file at host, which must still be the one
// lstat found (st).
func readKept(host string, st unix.Stat_t) ([]byte, error) {
	f, err := os.OpenFile(host, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &now); err != nil || now.Ino != st.Ino || now.Dev != st.Dev {
		return nil, errors.New("changed while read")
	}
	return fsops.ReadLimited(f, host, maxProtectKeep)
}
