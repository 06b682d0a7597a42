package fsops

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/policy"
)

// MaxListedTools bounds a tool listing across all CTX_PATH tiers.
const MaxListedTools = 1024

// ToolHit is a tool found through CTX_PATH.
type ToolHit struct {
	Name       string
	Dir        string      // the CTX_PATH directory that held it
	Path       string      // Dir/Name, the executable
	ControlDir string      // Dir/Name.d, the control directory beside it
	Info       fs.FileInfo // Lstat of Path
}

// SplitToolPath splits a CTX_PATH value. Empty components are dropped and so
// are relative ones: the current directory is never searched implicitly.
func SplitToolPath(v string) []string {
	var dirs []string
	for _, d := range filepath.SplitList(v) {
		if d != "" && filepath.IsAbs(d) {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs
}

// isToolEntry reports whether an Lstat result can be a tool: a regular file
// (never a symlink) with at least one execute bit.
func isToolEntry(info fs.FileInfo) bool {
	return info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// LookupTool searches dirs left to right for the first regular file with an
// execute bit named exactly name. Symlinks and non-executable files are not
// hits and do not stop the search. It returns an error wrapping ENOENT when
// nothing matches and EINVAL for an invalid tool name.
func LookupTool(dirs []string, name string) (ToolHit, error) {
	return LookupToolFunc(dirs, name, nil)
}

// LookupToolFunc is LookupTool that also passes over every hit accept
// refuses (nil accepts all): a refused hit is not found, exactly as if it
// were absent, and the search goes on with the next directory.
func LookupToolFunc(dirs []string, name string, accept func(ToolHit) bool) (ToolHit, error) {
	if err := policy.ValidName(name); err != nil {
		return ToolHit{}, &os.PathError{Op: "lookup", Path: name, Err: errnoError{syscall.EINVAL, err.Error()}}
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		info, err := os.Lstat(p)
		if err != nil || !isToolEntry(info) {
			continue
		}
		hit := ToolHit{Name: name, Dir: dir, Path: p, ControlDir: p + ".d", Info: info}
		if accept != nil && !accept(hit) {
			continue
		}
		return hit, nil
	}
	return ToolHit{}, &os.PathError{Op: "lookup", Path: name, Err: errnoError{syscall.ENOENT, "tool not found in CTX_PATH"}}
}

// ListTools returns the tools visible through dirs: the first hit for each
// name, tier by tier, sorted by name within a tier, at most MaxListedTools.
// truncated reports that more tools were present. Unreadable or missing
// directories are skipped.
func ListTools(dirs []string) (hits []ToolHit, truncated bool) {
	return ListToolsFunc(dirs, nil)
}

// ListToolsFunc is ListTools that also passes over every hit accept refuses
// (nil accepts all): a refused hit does not hide a tool of the same name in
// a later directory.
func ListToolsFunc(dirs []string, accept func(ToolHit) bool) (hits []ToolHit, truncated bool) {
	seen := map[string]bool{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		var tier []ToolHit
		for _, ent := range entries {
			name := ent.Name()
			if seen[name] || policy.ValidName(name) != nil {
				continue
			}
			info, err := ent.Info()
			if err != nil || !isToolEntry(info) {
				continue
			}
			p := filepath.Join(dir, name)
			hit := ToolHit{Name: name, Dir: dir, Path: p, ControlDir: p + ".d", Info: info}
			if accept != nil && !accept(hit) {
				continue
			}
			tier = append(tier, hit)
		}
		sort.Slice(tier, func(i, j int) bool { return tier[i].Name < tier[j].Name })
		for _, h := range tier {
			if len(hits) == MaxListedTools {
				return hits, true
			}
			seen[h.Name] = true
			hits = append(hits, h)
		}
	}
	return hits, false
}

// ReadControls reads the named control files of a control directory, each
// bounded and without following symlinks. Missing files are left out of the
// result; any other failure (a symlink, a directory, an oversized file) is
// an error naming the file.
func ReadControls(dir string, names []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(names))
	// The directory is listed once and only the names in it are opened:
	// most of an agent's controls are usually absent, and a failed open
	// walks the whole path as a successful one does. A file made after
	// the listing counts as missing, as one made after the read would.
	present := map[string]bool{}
	if listed, err := DirNames(dir); err == nil {
		for _, n := range listed {
			present[n] = true
		}
	} else {
		present = nil // not listable: every name is tried, as before
	}
	for _, n := range names {
		if present != nil && !present[n] {
			continue
		}
		b, err := ReadControl(filepath.Join(dir, n))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[n] = b
	}
	return out, nil
}

// MaxControlEntries bounds the walk of one tool control directory.
const MaxControlEntries = 256

// OwnerChain gathers the facts the tool-trust rule walks for target: top
// (stat, so a symlinked tree root is followed: it is the administrator's),
// then each component below it down to target (lstat, never following).
// target must be top or below it; both absolute and clean. The walk stops
// at the first component that does not exist (missing reports it): what
// exists is returned. Any other failure is an error naming the path.
func OwnerChain(top, target string) (facts []policy.FileFacts, missing bool, err error) {
	info, err := os.Stat(top)
	if err != nil {
		return nil, errors.Is(err, fs.ErrNotExist), err
	}
	facts = append(facts, ownerFacts(top, info))
	rel, err := filepath.Rel(top, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return facts, false, fmt.Errorf("%s is not within %s", target, top)
	}
	if rel == "." {
		return facts, false, nil
	}
	p := top
	for _, comp := range strings.Split(rel, "/") {
		p = filepath.Join(p, comp)
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return facts, true, nil
		}
		if err != nil {
			return facts, false, err
		}
		facts = append(facts, ownerFacts(p, info))
		if info.Mode()&fs.ModeSymlink != 0 {
			return facts, false, nil // never walked through
		}
	}
	return facts, false, nil
}

// ControlTreeFacts gathers the facts of a tool's control directory and of
// every entry below it (lstat, never following a symlink), each directory
// before its entries, at most MaxControlEntries: more reports that the
// walk stopped there. A directory that does not exist yields nothing.
//
// It walks by descriptor: each directory is opened once (O_NOFOLLOW) and
// its entries are examined relative to it, not by their whole path from /
// (an agent start examines every projected tool's tree: by path, each
// entry's lookup repeated the walk from /).
func ControlTreeFacts(dir string) (facts []policy.FileFacts, more bool, err error) {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		if err == unix.ENOENT {
			return nil, false, nil
		}
		return nil, false, &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	facts = append(facts, statFacts(dir, &st))
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return facts, false, nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, &os.PathError{Op: "open", Path: dir, Err: noFollowErr(err)}
	}
	more, err = controlDirFacts(fd, dir, &facts)
	return facts, more, err
}

// controlDirFacts appends the facts of the entries of the directory open
// as fd (at p), sorted by name, recursing into directories; it closes fd.
//
// The directory is listed with getdents on fd itself: an os.File around
// it cost each directory a fcntl and the os package's directory reader.
func controlDirFacts(fd int, p string, facts *[]policy.FileFacts) (more bool, err error) {
	defer unix.Close(fd)
	names, err := dirNamesFD(fd, p)
	if err != nil {
		return false, err
	}
	slices.Sort(names)
	for _, name := range names {
		if len(*facts) == MaxControlEntries {
			return true, nil
		}
		ep := p + "/" + name
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue // removed meanwhile
			}
			return false, &os.PathError{Op: "lstat", Path: ep, Err: err}
		}
		*facts = append(*facts, statFacts(ep, &st))
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			return false, &os.PathError{Op: "open", Path: ep, Err: noFollowErr(err)}
		}
		if more, err := controlDirFacts(sub, ep, facts); more || err != nil {
			return more, err
		}
	}
	return false, nil
}

// statFacts is ownerFacts for a raw lstat result.
func statFacts(p string, st *unix.Stat_t) policy.FileFacts {
	mode := fileMode(st.Mode) | os.FileMode(st.Mode&0o777)
	if st.Mode&unix.S_ISUID != 0 {
		mode |= os.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= os.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= os.ModeSticky
	}
	return policy.FileFacts{Path: p, Mode: mode, UID: st.Uid, GID: st.Gid}
}

// ownerFacts converts an lstat (or stat) result.
func ownerFacts(p string, info fs.FileInfo) policy.FileFacts {
	ff := policy.FileFacts{Path: p, Mode: info.Mode()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		ff.UID, ff.GID = st.Uid, st.Gid
	}
	return ff
}
