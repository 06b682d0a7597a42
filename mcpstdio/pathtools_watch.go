package mcpstdio

import (
	"os"
	"slices"

	"ctx/fsops"
)

// A served listing kept while nothing it was read from changes
// (PathTools.Revision): the directories searched and each tool's control
// directory are watched (inotify, fsops.DirWatch), so a call finds the
// listing still good by one read of the watch's queue instead of a stat of
// every tool's file and controls. The kernel queues a change before the
// call that made it returns, so a listing is never reused past a change
// completed before the Tools call began. Without a watch (inotify refused,
// the watch limit reached) every Tools call compares the files' status as
// before (filesKey).

// listingWatch is the watch and what the last listing was read under;
// guarded by PathTools.listMu.
type listingWatch struct {
	w     *fsops.DirWatch
	tried bool // nil w after trying: no watch can be had
	// partial: a directory could not be watched; no listing is reused
	// on the watch's word.
	partial bool
	// gen counts the changes seen; listedGen and listedRev are the count
	// and the revision the kept listing was read at; valid once one is.
	gen, listedGen uint64
	listedRev      string
	valid          bool
}

// listed notes that the kept listing was read at gen and rev.
func (l *listingWatch) listed(rev string, gen uint64) {
	if l.w != nil {
		l.listedGen, l.listedRev, l.valid = gen, rev, true
	}
}

// unchangedListing returns the kept listing when the watch holds, no
// change that matters is queued and the revision is rev; else ok is false
// and gen is the count a listing read from now on is kept at.
func (p *PathTools) unchangedListing(rev string) (cached []ServedTool, gen uint64, ok bool) {
	p.listMu.Lock()
	defer p.listMu.Unlock()
	l := &p.watch
	if l.w == nil {
		return nil, 0, false
	}
	if l.w.ChangedIn(p.listingChange) {
		l.gen++
	}
	if l.partial || !l.w.Complete() || !l.valid || l.listedGen != l.gen || l.listedRev != rev {
		return nil, l.gen, false
	}
	return p.listCached, l.gen, true
}

// listingChange reports whether a change to name in the watched dir can
// change the listing: anything in a directory searched, and in a control
// directory the directory itself, the controls a description is read from
// and its policy (not its log, which every call appends to).
func (p *PathTools) listingChange(dir, name string) bool {
	if name == "" || name == "policy" || slices.Contains(p.Dirs, dir) {
		return true
	}
	return slices.Contains(toolControls, name)
}

// watchListing watches the directories searched and the control
// directories of hits, starting the watch the first time.
func (p *PathTools) watchListing(hits []fsops.ToolHit) {
	p.listMu.Lock()
	l := &p.watch
	if l.w == nil && !l.tried {
		l.tried = true
		l.w, _ = fsops.NewDirWatch()
	}
	w := l.w
	p.listMu.Unlock()
	if w == nil {
		return
	}
	// A directory searched is watched with its ancestors kept by status,
	// so that one missing now is seen when it is made.
	for _, d := range p.Dirs {
		w.AddWithAncestors(d, d)
	}
	dirs := append([]string(nil), p.Dirs...)
	for _, h := range hits {
		w.Add(h.ControlDir)
		dirs = append(dirs, h.ControlDir)
	}
	// One that is there but not a directory (a symlink to one: inotify
	// would watch the link's target only by the path it has now) cannot
	// be watched: every listing is then compared by status.
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && !fi.IsDir() {
			p.listMu.Lock()
			l.partial = true
			p.listMu.Unlock()
			return
		}
	}
}
