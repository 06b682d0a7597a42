package fsops

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

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

// Bounds of the start's census: past maxProtectItems paths it records no
// more (and says so; the end would then move aside a path it did not
// record, losing nothing); content is kept up to maxProtectKeep bytes a
// file and maxProtectKeepAll in all. The end's census has no bound: it
// records nothing, and each path is dealt with as it is found, so no
// number of decoys hides one.
const (
	MaxProtectItems   = 100000
	MaxProtectKeep    = 1 << 20
	maxProtectKeepAll = 32 << 20
	maxGitNesting     = 8
)

// ProtectItem is one protected file or symlink as the census found it.
type ProtectItem struct {
	St   unix.Stat_t
	link string
	Orig *Original // the start's copy, nil when not kept
}

// Same reports whether two looks found the same, unchanged object: any
// write, chmod, chown or rename changes its ctime.
func (a *ProtectItem) Same(b *ProtectItem) bool {
	return a.St.Dev == b.St.Dev && a.St.Ino == b.St.Ino && a.St.Mode == b.St.Mode && a.St.Size == b.St.Size &&
		a.St.Mtim == b.St.Mtim && a.St.Ctim == b.St.Ctim && a.St.Uid == b.St.Uid && a.St.Gid == b.St.Gid && a.link == b.link
}

// ProtectCensus is one look at the workspace.
type ProtectCensus struct {
	Workspace string
	Set       []policy.ProtectPattern
	Mounts    map[string]bool
	keep      bool // the start: keep content
	kept      int64
	Items     map[string]*ProtectItem
	Truncated bool
	// Visit, at the end, takes each path as it is found instead of
	// items.
	Visit    func(rel string, it *ProtectItem)
	Repaired []string // directories given back their owner's r and x
	// Known, at the start, are the directories the search for protected
	// paths listed a moment before (by path relative to the workspace):
	// the census takes them as listed instead of listing them again.
	Known   map[string]DirSketch
	scanner DirScanner
}

// takeCensus walks the whole workspace (no bound on directories: a new
// repository may be anywhere), never following a symlink, never into
// another mount (not in the sandbox) or a protected path (counted whole).
// known are the listings the start's search made (nil: none).
func TakeProtectCensus(ws string, set []policy.ProtectPattern, mounts map[string]bool, keep bool, known map[string]DirSketch) *ProtectCensus {
	c := &ProtectCensus{Workspace: ws, Set: set, Mounts: mounts, keep: keep, Items: map[string]*ProtectItem{}, Known: known}
	c.Walk()
	return c
}

// ProtectWanted are the names a protect walk looks for in each directory:
// the first component of every pattern, and what marks a bare git
// repository.
func ProtectWanted(set []policy.ProtectPattern) map[string]bool {
	wanted := map[string]bool{"objects": true, "refs": true, "HEAD": true}
	for _, p := range set {
		first, _, _ := strings.Cut(p.Path, "/")
		wanted[first] = true
	}
	return wanted
}

func (c *ProtectCensus) Walk() {
	set := c.Set
	anyDepth, bare := false, false
	for _, p := range set {
		anyDepth = anyDepth || p.AnyDepth
		bare = bare || p == policy.ProtectPattern{Path: ".git", AnyDepth: true}
	}
	wanted := ProtectWanted(set)
	stack := []string{""}
	for len(stack) > 0 && !c.Truncated {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		sk := c.sketch(dir, wanted)
		if bare && sk.Found["objects"] && sk.Found["refs"] && sk.Has("HEAD") {
			// A git directory under another name (a bare repository):
			// git uses it, config and hooks, when started inside it.
			c.gitDir(dir, 0)
			continue
		}
		var done map[string]bool
		for _, p := range set {
			if dir != "" && !p.AnyDepth {
				continue
			}
			first, _, _ := strings.Cut(p.Path, "/")
			if sk.Has(first) {
				c.matched(filepath.Join(dir, p.Path))
				if done == nil {
					done = map[string]bool{}
				}
				done[filepath.Join(dir, p.Path)] = true
			}
		}
		if !anyDepth {
			break // the top-level patterns are all looked at
		}
		for _, name := range sk.Subdirs {
			rel := filepath.Join(dir, name)
			if !done[rel] && c.sameMount(rel) {
				stack = append(stack, rel)
			}
		}
	}
}

// readNames lists dir without following a symlink at its end: each name
// and whether it is a directory (a symlink is not). ok is false when it
// could not be opened; uid and mode are the directory's.
func (c *ProtectCensus) readNames(dir string) (names map[string]bool, uid, mode uint32, ok bool) {
	names = map[string]bool{}
	uid, mode, _ = c.scanner.Scan(dir, func(name []byte, isDir bool) { names[string(name)] = isDir })
	if mode == 0 { // not opened (a listing cut short keeps what it read)
		return nil, 0, 0, false // unreadable to the host: not the agent's either
	}
	return names, uid, mode, true
}

// sketch is what the walk needs of the directory rel: a listing the
// start's search made, else its own (sketchOwn).
func (c *ProtectCensus) sketch(rel string, wanted map[string]bool) DirSketch {
	if sk, ok := c.Known[rel]; ok && c.Visit == nil {
		return sk
	}
	host := filepath.Join(c.Workspace, rel)
	sk, uid, mode, _ := c.scanner.Sketch(host, wanted)
	if c.needsRepair(rel, mode != 0, uid, mode) { // mode 0: not opened
		sk, _, _, _ = c.scanner.Sketch(host, wanted)
	}
	return sk
}

// list is readNames of rel for the census, repaired as sketch repairs.
func (c *ProtectCensus) list(rel string) map[string]bool {
	host := filepath.Join(c.Workspace, rel)
	names, uid, mode, ok := c.readNames(host)
	if c.needsRepair(rel, ok, uid, mode) {
		names, _, _, _ = c.readNames(host)
	}
	return names
}

// needsRepair reports whether the directory rel was given back its
// owner's r and x, and must be listed again: at the end, a directory of
// the caller's that the run made unreadable or unsearchable to its owner
// (the agent runs as the caller's uid in userns and landlock; root reads
// it anyway) gets them back, and a finding says so: otherwise what it
// holds would not be compared. ok says the listing opened it.
func (c *ProtectCensus) needsRepair(rel string, ok bool, uid, mode uint32) bool {
	if c.Visit == nil || os.Geteuid() == 0 || (ok && (uid != uint32(os.Geteuid()) || mode&0o500 == 0o500)) {
		return false
	}
	repaired := false
	for _, p := range []string{filepath.Dir(rel), rel} {
		if p != "." && p != "/" && GiveOwnerSearch(filepath.Join(c.Workspace, p)) {
			c.Repaired, repaired = append(c.Repaired, p), true
		}
	}
	return repaired
}

func (c *ProtectCensus) sameMount(rel string) bool {
	if len(c.Mounts) == 0 {
		return true
	}
	for p := filepath.Join(c.Workspace, rel); p != c.Workspace && len(p) > len(c.Workspace); p = filepath.Dir(p) {
		if c.Mounts[p] {
			return false
		}
	}
	return true
}

// matched counts the protected path rel: a symlink (there or on the way)
// is counted itself, a git directory by what git loads, another
// directory by everything in it.
func (c *ProtectCensus) matched(rel string) {
	if !c.sameMount(rel) {
		return
	}
	st, err := StatNoSymlinks(filepath.Join(c.Workspace, rel))
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
func (c *ProtectCensus) symlinkOnTheWay(rel string) {
	cur := ""
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		if st, err := Lstat(filepath.Join(c.Workspace, cur)); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			c.add(cur)
			return
		}
	}
}

// gitDir counts what git loads or runs from the git directory rel.
func (c *ProtectCensus) gitDir(rel string, depth int) {
	for _, n := range policy.GitWatched() {
		c.addIfPresent(filepath.Join(rel, n))
	}
	hooks := filepath.Join(rel, "hooks")
	if st, err := Lstat(filepath.Join(c.Workspace, hooks)); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			c.add(hooks)
		} else {
			for name, isDir := range c.list(hooks) {
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
		for name, isDir := range c.list(filepath.Join(rel, sub)) {
			if isDir {
				c.gitDir(filepath.Join(rel, sub, name), depth+1)
			}
		}
	}
}

// tree counts every file and symlink below the directory rel.
func (c *ProtectCensus) tree(rel string) {
	for name, isDir := range c.list(rel) {
		p := filepath.Join(rel, name)
		switch {
		case c.Truncated:
			return
		case isDir && c.sameMount(p):
			c.tree(p)
		case !isDir:
			c.add(p)
		}
	}
}

func (c *ProtectCensus) addIfPresent(rel string) {
	if _, err := Lstat(filepath.Join(c.Workspace, rel)); err == nil {
		c.add(rel)
	}
}

// add records rel (a file or a symlink) and, at the start, keeps its
// content within the bounds.
func (c *ProtectCensus) add(rel string) {
	if c.Visit == nil && len(c.Items) >= MaxProtectItems {
		c.Truncated = true
		return
	}
	host := filepath.Join(c.Workspace, rel)
	st, err := Lstat(host)
	if err != nil {
		return
	}
	it := &ProtectItem{St: st}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		it.link, _ = os.Readlink(host)
		if c.keep {
			it.Orig = &Original{Mode: st.Mode, UID: st.Uid, GID: st.Gid, Link: it.link}
		}
	case unix.S_IFREG:
		if c.keep && st.Size <= MaxProtectKeep && c.kept+st.Size <= maxProtectKeepAll {
			if data, err := readKept(host, st); err == nil {
				c.kept += int64(len(data))
				it.Orig = &Original{Mode: st.Mode, UID: st.Uid, GID: st.Gid, Data: data}
			}
		}
	}
	if c.Visit != nil {
		c.Visit(rel, it)
		return
	}
	c.Items[rel] = it
}

// readKept reads the regular file at host, which must still be the one
// lstat found (st).
func readKept(host string, st unix.Stat_t) ([]byte, error) {
	f, err := OpenRegular(host)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if now, ok := fi.Sys().(*syscall.Stat_t); !ok || now.Ino != st.Ino || now.Dev != st.Dev {
		return nil, errors.New("changed while read")
	}
	return ReadLimited(f, host, MaxProtectKeep)
}
