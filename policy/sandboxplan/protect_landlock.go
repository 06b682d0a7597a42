package sandboxplan

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"ctx/policy"
)

// Protected paths under Landlock (iso landlock, and iso shared where the
// kernel has Landlock). Landlock only grants: a rule on a directory gives
// its rights to everything beneath it, and no rule takes a right away. So
// "the workspace is writable except .git" cannot be one rule: the
// writable rule is decomposed. Walking from the rule's directory down to
// each protected path, every directory on the way (the chain) keeps only
// the rule's read (and execute) rights; every entry of a chain directory
// that is neither on the way nor protected gets the full write rule of
// its own; the protected path gets no rule and so only what the
// directories above it give: read.
//
// What follows, and the manual states (ctx man sandbox):
//   - no entry can be created, removed or renamed directly in a chain
//     directory (the workspace's top when .git is protected): the make
//     and remove rights of a directory are what a rule on it grants, and
//     none does; the existing files there stay writable in place, the
//     existing directories writable whole;
//   - a protected path that does not exist cannot be created: its deepest
//     existing directory is on the way to it, so nothing can be made
//     there; a regular file where a directory would lead cannot be
//     removed, so nothing comes to be below it;
//   - a symlink among the entries gets no rule (it stays as it is, since
//     its directory grants no removal, and what it points to keeps the
//     rights of its own path); a symlink on the way is refused, as the
//     run host refuses one at start.
//
// ProtectAccess does this over a directory listing the caller passes in,
// so it is pure: the run host reads the directories (applets), the tests
// and the fuzz target give it made-up trees.

// ProtectDirEntry is one entry of a directory, as ProtectAccess needs it.
type ProtectDirEntry struct {
	Name    string
	Dir     bool // a directory (false for a symlink to one)
	Symlink bool
}

// ProtectLister lists the directory at an absolute path. An error leaves
// that directory's entries without a write rule (read-only, the safe
// side); ProtectAccess records it in Unlisted.
type ProtectLister func(dir string) ([]ProtectDirEntry, error)

// Bounds on the decomposition: a chain directory with more entries is
// refused (one rule an entry), and so is a decomposition past the total.
const (
	MaxProtectDirEntries = 4096
	MaxProtectRules      = 65536
)

// ProtectDecomposition is what ProtectAccess made of a rule set.
type ProtectDecomposition struct {
	// Access is the rule set with every writable rule that holds a
	// protected path replaced by its decomposition, in order.
	Access []AccessRule
	// Chain are the directories on the way to a protected path inside a
	// writable rule, sorted: readable (and executable) only, so nothing
	// can be created, removed or renamed directly in them.
	Chain []string
	// WriteRules counts the write rules the decomposition added.
	WriteRules int
	// Demoted are writable rules at or inside a protected path, made
	// read-only whole.
	Demoted []string
	// Absent are the protected paths inside a writable rule that the
	// listing did not show: they cannot be created.
	Absent []string
	// Unlisted are chain directories the lister could not read: their
	// entries got no write rule.
	Unlisted []string
}

// ProtectLimitError is a chain directory with too many entries for a rule
// each, or a decomposition past MaxProtectRules.
type ProtectLimitError struct {
	Dir     string // the directory whose entries tipped it over
	Entries int    // its entries (as many as were read), or the rules so far
	Total   bool   // the total bound, not the directory's
}

func (e *ProtectLimitError) Error() string {
	if e.Total {
		return fmt.Sprintf("protect: more than %d Landlock rules would stand for the writable places around the protected paths (at %s); protect fewer paths or start the agent in a smaller workspace", MaxProtectRules, e.Dir)
	}
	return fmt.Sprintf("protect: %s, on the way to a protected path, has more than %d entries, and Landlock would need a rule for each; move entries into a subdirectory, start the agent elsewhere, or take the entry out with a ! line in the protect control", e.Dir, MaxProtectDirEntries)
}

// ProtectAccess decomposes every writable rule of access that holds one of
// targets (absolute paths to keep read-only) strictly below its own path,
// and makes a writable rule at or inside a target read-only. Rules without
// a target inside, and read-only rules, are kept as they are. Targets need
// not exist. Rule paths are absolute and clean, as a plan's are.
func ProtectAccess(access []AccessRule, targets []string, list ProtectLister) (*ProtectDecomposition, error) {
	ts, err := protectTargets(targets)
	if err != nil {
		return nil, err
	}
	d := &ProtectDecomposition{}
	cache := map[string]listing{}
	chain := map[string]bool{}
	absent := map[string]bool{}
	for _, r := range access {
		if !r.Write {
			d.Access = append(d.Access, r)
			continue
		}
		if t := coveringTarget(ts, r.Path); t != "" {
			r.Write = false
			d.Access = append(d.Access, r)
			d.Demoted = append(d.Demoted, r.Path)
			continue
		}
		var below []string
		for _, t := range ts {
			if t != r.Path && policy.Within(t, r.Path) {
				below = append(below, t)
			}
		}
		if len(below) == 0 {
			d.Access = append(d.Access, r)
			continue
		}
		ro := r
		ro.Write = false
		d.Access = append(d.Access, ro)
		if err := d.decompose(r, below, list, cache, chain, absent); err != nil {
			return nil, err
		}
	}
	for c := range chain {
		d.Chain = append(d.Chain, c)
	}
	sort.Strings(d.Chain)
	for a := range absent {
		d.Absent = append(d.Absent, a)
	}
	sort.Strings(d.Absent)
	return d, nil
}

// listing is one directory's entries, or why they could not be read.
type listing struct {
	entries []ProtectDirEntry
	err     error
}

// way is what a chain directory holds of the chains: the names that lead
// on toward a target, and the names that are targets.
type way struct {
	lead   map[string]bool
	target map[string]bool
}

func (d *ProtectDecomposition) decompose(r AccessRule, below []string, list ProtectLister, cache map[string]listing,
	chain, absent map[string]bool) error {
	ways := map[string]*way{}
	at := func(dir string) *way {
		w := ways[dir]
		if w == nil {
			w = &way{lead: map[string]bool{}, target: map[string]bool{}}
			ways[dir] = w
		}
		return w
	}
	for _, t := range below {
		rel := strings.TrimPrefix(t[len(r.Path):], "/")
		comps := strings.Split(rel, "/")
		cur := r.Path
		for i, c := range comps {
			if i == len(comps)-1 {
				at(cur).target[c] = true
			} else {
				at(cur).lead[c] = true
			}
			cur = path.Join(cur, c)
		}
	}
	seen := map[string]bool{} // targets the listings showed
	queue := []string{r.Path}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		chain[dir] = true
		w := at(dir)
		l, ok := cache[dir]
		if !ok {
			l.entries, l.err = list(dir)
			cache[dir] = l
		}
		if l.err != nil {
			d.Unlisted = appendOnce(d.Unlisted, dir)
			continue
		}
		if len(l.entries) > MaxProtectDirEntries {
			return &ProtectLimitError{Dir: dir, Entries: len(l.entries)}
		}
		entries := append([]ProtectDirEntry(nil), l.entries...)
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
		for i, e := range entries {
			if i > 0 && e.Name == entries[i-1].Name {
				continue
			}
			if e.Name == "" || e.Name == "." || e.Name == ".." || strings.Contains(e.Name, "/") {
				return fmt.Errorf("protect: %s lists %q, not a directory entry", dir, e.Name)
			}
			child := path.Join(dir, e.Name)
			switch {
			case w.target[e.Name]:
				seen[child] = true // protected: read from the rule above
			case w.lead[e.Name] && e.Symlink:
				return fmt.Errorf("protect: %s is a symlink on the way to a protected path; ctx neither follows nor protects a symlink", child)
			case w.lead[e.Name] && e.Dir:
				queue = append(queue, child)
			case e.Symlink:
				// No rule: the link stays, its target keeps its own path's rights.
			default:
				d.Access = append(d.Access, AccessRule{Path: child, Write: true, Exec: r.Exec, Dev: r.Dev, Optional: true, Connect: r.Connect})
				d.WriteRules++
				if d.WriteRules > MaxProtectRules {
					return &ProtectLimitError{Dir: dir, Entries: d.WriteRules, Total: true}
				}
			}
		}
	}
	for _, t := range below {
		if !seen[t] {
			absent[t] = true
		}
	}
	return nil
}

// protectTargets checks and normalizes the targets: absolute, cleaned,
// without repeats and without one inside another (the outer one covers it).
func protectTargets(targets []string) ([]string, error) {
	var ts []string
	for _, t := range targets {
		if !path.IsAbs(t) || strings.ContainsRune(t, 0) {
			return nil, fmt.Errorf("protect: %q is not an absolute path", t)
		}
		ts = append(ts, path.Clean(t))
	}
	sort.Strings(ts)
	var out []string
	for _, t := range ts {
		if coveringTarget(out, t) == "" {
			out = append(out, t)
		}
	}
	// A path sorts after every path it lies inside (a prefix sorts
	// first), so the outer target is kept before any inner one is seen.
	return out, nil
}

// coveringTarget returns the target that p is or lies inside, or "".
func coveringTarget(ts []string, p string) string {
	for _, t := range ts {
		if policy.Within(p, t) {
			return t
		}
	}
	return ""
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
