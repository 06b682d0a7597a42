package fsops

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"ctx/policy"
)

// EntryKind says what a managed tree entry is.
type EntryKind int

const (
	KindDir  EntryKind = iota // a directory
	KindFile                  // a regular file with given contents
	KindLink                  // a hard link to another managed file (tool/NAME → bin/ctx)
)

// Entry is one path of the tree bootstrap manages.
type Entry struct {
	Rel  string // slash-separated, relative to the root
	Kind EntryKind
	Mode fs.FileMode
	Data []byte // KindFile contents
	// Owned files belong to ctx and are rewritten when their contents
	// differ (the binary, built-in tool metadata, the docs bundle). Other
	// files are created when missing and never rewritten: they belong to
	// the administrator once they exist.
	Owned  bool
	LinkTo string // KindLink: Rel of the file this entry is a hard link of
	// Chown gives a directory to UID/GID (an agent's home in a root tree,
	// where the agent runs as its own unprivileged uid). Only root can.
	Chown    bool
	UID, GID int
}

// Action is one change Reconcile made (or would make).
type Action struct {
	Verb   string // created, updated, repaired, relinked, kept
	Rel    string
	Detail string
}

func (a Action) String() string { return reportLine(a.Verb, a.Rel, a.Detail) }

// reportLine is one line of what ctx did or found at a managed path:
// "WORD REL", then ": DETAIL" when there is one.
func reportLine(word, rel, detail string) string {
	if detail == "" {
		return word + " " + rel
	}
	return word + " " + rel + ": " + detail
}

// Reconcile makes the tree match entries, in order (parents first). It
// creates what is missing, rewrites owned files whose contents differ,
// repairs modes, and re-links stale hard links that an earlier run created
// (wasManaged). It never writes through a symlink, never removes anything it
// does not manage, and leaves foreign files at managed paths alone ("kept").
// It stops at the first error that would make continuing unsafe.
//
// An existing directory is adopted only when root, the caller, the tree
// owner or (for a directory given to an agent) that agent's uid owns it:
// in a root tree home/ is world-writable, and a directory another user
// made there first may hold what the agent would run (a *ForeignError).
func (r Root) Reconcile(entries []Entry, wasManaged func(rel string) bool) ([]Action, error) {
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return nil, err
	}
	owner, err := r.TreeOwner()
	if err != nil {
		return nil, err
	}
	adopt := adopter{owner: owner, caller: uint32(os.Geteuid())}
	var actions []Action
	for _, e := range entries {
		a, err := r.reconcileOne(e, wasManaged, adopt)
		if err != nil {
			return actions, fmt.Errorf("%s: %w", e.Rel, err)
		}
		if a.Verb != "" {
			actions = append(actions, a)
		}
	}
	return actions, nil
}

// adopter says whose existing directories bootstrap takes as its own.
type adopter struct{ owner, caller uint32 }

// check refuses directory p (entry e) when another uid made it.
func (a adopter) check(p string, e Entry, st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	uid := sys.Uid
	if uid == 0 || uid == a.owner || uid == a.caller || (e.Chown && int(uid) == e.UID) {
		return nil
	}
	return &ForeignError{What: "not adopted: another uid made it", Path: p,
		Reason: fmt.Sprintf("%s is owned by uid %d, neither root, the tree owner (uid %d) nor the caller (uid %d)", e.Rel, uid, a.owner, a.caller),
		Fix:    foreignFix(p, a.owner, false) + "; then run ctx bootstrap again"}
}

func (r Root) reconcileOne(e Entry, wasManaged func(string) bool, adopt adopter) (Action, error) {
	p := r.Path(filepath.FromSlash(e.Rel))
	st, err := os.Lstat(p)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return Action{}, err
	}
	if !missing && st.Mode()&fs.ModeSymlink != 0 {
		return Action{}, &os.PathError{Op: "bootstrap", Path: p, Err: ErrSymlink}
	}
	switch e.Kind {
	case KindDir:
		if !missing {
			if err := adopt.check(p, e, st); err != nil {
				return Action{}, err
			}
		}
		return r.reconcileDir(p, e, st, missing)
	case KindFile:
		return r.reconcileFile(p, e, st, missing)
	case KindLink:
		return r.reconcileLink(p, e, st, missing, wasManaged)
	}
	return Action{}, fmt.Errorf("unknown entry kind %d", e.Kind)
}

// reconcileDir makes directory entry e at p, or repairs its owner and mode.
func (r Root) reconcileDir(p string, e Entry, st fs.FileInfo, missing bool) (Action, error) {
	if missing {
		if err := os.Mkdir(p, e.Mode); err != nil {
			return Action{}, err
		}
		if err := os.Chmod(p, e.Mode); err != nil { // umask
			return Action{}, err
		}
		if e.Chown {
			if err := os.Lchown(p, e.UID, e.GID); err != nil {
				return Action{}, err
			}
		}
		return Action{Verb: "created", Rel: e.Rel + "/"}, SyncDir(filepath.Dir(p))
	}
	if !st.IsDir() {
		return Action{}, &os.PathError{Op: "bootstrap", Path: p, Err: syscall.ENOTDIR}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && e.Chown && (int(sys.Uid) != e.UID || int(sys.Gid) != e.GID) {
		if err := os.Lchown(p, e.UID, e.GID); err != nil {
			return Action{}, err
		}
		return Action{Verb: "repaired", Rel: e.Rel, Detail: fmt.Sprintf("owner %d:%d, was %d:%d", e.UID, e.GID, sys.Uid, sys.Gid)}, nil
	}
	return r.repairMode(p, e, st)
}

// reconcileFile writes file entry e at p when missing, replaces an owned
// file whose bytes differ, and repairs its mode.
func (r Root) reconcileFile(p string, e Entry, st fs.FileInfo, missing bool) (Action, error) {
	if missing {
		if err := WriteNew(p, e.Data, e.Mode); err != nil {
			return Action{}, err
		}
		return Action{Verb: "created", Rel: e.Rel}, nil
	}
	if !st.Mode().IsRegular() {
		return Action{}, &os.PathError{Op: "bootstrap", Path: p, Err: notRegular(st.Mode())}
	}
	if e.Owned {
		// Owned files are replaced by rename, never rewritten in place,
		// so other hard links to the old inode keep their bytes.
		same, err := sameContents(p, e.Data, st)
		if err != nil {
			return Action{}, err
		}
		if !same {
			if err := WriteAtomic(p, e.Data, e.Mode); err != nil {
				return Action{}, err
			}
			return Action{Verb: "updated", Rel: e.Rel}, nil
		}
	}
	return r.repairMode(p, e, st)
}

// reconcileLink links (or copies) link entry e at p to its target, and
// relinks one an earlier bootstrap made to a binary since replaced.
func (r Root) reconcileLink(p string, e Entry, st fs.FileInfo, missing bool, wasManaged func(string) bool) (Action, error) {
	target := r.Path(filepath.FromSlash(e.LinkTo))
	tst, err := os.Stat(target)
	if err != nil {
		return Action{}, err
	}
	if missing {
		return Action{Verb: "created", Rel: e.Rel}, linkOrCopy(target, p, e.Mode)
	}
	if os.SameFile(st, tst) {
		return Action{}, nil
	}
	if !wasManaged(e.Rel) {
		return Action{Verb: "kept", Rel: e.Rel, Detail: "not created by bootstrap; left unchanged"}, nil
	}
	// An earlier bootstrap linked this to a binary that has since been
	// replaced: link the new one in its place, atomically.
	tmp := TempName(p)
	if err := linkOrCopy(target, tmp, e.Mode); err != nil {
		return Action{}, err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return Action{}, err
	}
	return Action{Verb: "relinked", Rel: e.Rel}, SyncDir(filepath.Dir(p))
}

func (r Root) repairMode(p string, e Entry, st fs.FileInfo) (Action, error) {
	want := e.Mode & (fs.ModePerm | fs.ModeSticky | fs.ModeSetgid)
	have := st.Mode() & (fs.ModePerm | fs.ModeSticky | fs.ModeSetgid)
	if have == want {
		return Action{}, nil
	}
	if err := os.Chmod(p, want); err != nil {
		return Action{}, err
	}
	return Action{Verb: "repaired", Rel: e.Rel, Detail: fmt.Sprintf("mode %s, was %s", policy.ModeString(want), policy.ModeString(have))}, nil
}

// linkOrCopy hard-links src to dst, or copies it when they are on different
// filesystems (the copy is still a regular executable file that CTX_PATH
// lookup accepts; doctor reports it).
func linkOrCopy(src, dst string, mode fs.FileMode) error {
	err := os.Link(src, dst)
	if !errors.Is(err, syscall.EXDEV) {
		if err == nil {
			return SyncDir(filepath.Dir(dst))
		}
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return WriteNew(dst, b, mode)
}

func sameContents(p string, want []byte, st fs.FileInfo) (bool, error) {
	if st.Size() != int64(len(want)) {
		return false, nil
	}
	f, err := OpenRegular(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	have, err := readLimited(f, p, int64(len(want)))
	if err != nil {
		return false, err
	}
	return bytes.Equal(have, want), nil
}

// Finding is one line of ctx doctor: a check of one managed path.
type Finding struct {
	Status string // ok, missing, invalid, stale, unexpected
	Rel    string
	Detail string
}

func (f Finding) String() string { return reportLine(f.Status, f.Rel, f.Detail) }

// Inspect checks entries against the tree without writing anything.
func (r Root) Inspect(entries []Entry) []Finding {
	var out []Finding
	for _, e := range entries {
		out = append(out, r.inspectOne(e))
	}
	return out
}

func (r Root) inspectOne(e Entry) Finding {
	p := r.Path(filepath.FromSlash(e.Rel))
	rel := e.Rel
	if e.Kind == KindDir {
		rel += "/"
	}
	st, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Finding{"missing", rel, ""}
	}
	if err != nil {
		return Finding{"invalid", rel, err.Error()}
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return Finding{"invalid", rel, "is a symlink"}
	}
	switch e.Kind {
	case KindDir:
		if !st.IsDir() {
			return Finding{"invalid", rel, "not a directory"}
		}
	case KindFile:
		if !st.Mode().IsRegular() {
			return Finding{"invalid", rel, "not a regular file"}
		}
		if e.Owned {
			same, err := sameContents(p, e.Data, st)
			if err != nil {
				return Finding{"invalid", rel, err.Error()}
			}
			if !same {
				return Finding{"stale", rel, "differs from this ctx binary's copy; run ctx bootstrap"}
			}
		}
	case KindLink:
		tst, err := os.Stat(r.Path(filepath.FromSlash(e.LinkTo)))
		if err != nil {
			return Finding{"invalid", rel, err.Error()}
		}
		if !st.Mode().IsRegular() {
			return Finding{"invalid", rel, "not a regular file"}
		}
		if !os.SameFile(st, tst) {
			return Finding{"stale", rel, "not a hard link of " + e.LinkTo + "; run ctx bootstrap"}
		}
		return Finding{"ok", rel, ""}
	}
	want := e.Mode & (fs.ModePerm | fs.ModeSticky | fs.ModeSetgid)
	have := st.Mode() & (fs.ModePerm | fs.ModeSticky | fs.ModeSetgid)
	if want != have {
		return Finding{"invalid", rel, fmt.Sprintf("mode %s, want %s", policy.ModeString(have), policy.ModeString(want))}
	}
	return Finding{"ok", rel, ""}
}

// RelPath returns p relative to the root in slash form, or "" when p is not
// inside the root.
func (r Root) RelPath(p string) string {
	rel, err := filepath.Rel(r.Dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.ToSlash(rel)
}
