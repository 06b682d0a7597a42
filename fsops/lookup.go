package fsops

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

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
	if err := policy.ValidName(name); err != nil {
		return ToolHit{}, &os.PathError{Op: "lookup", Path: name, Err: errnoError{syscall.EINVAL, err.Error()}}
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		info, err := os.Lstat(p)
		if err != nil || !isToolEntry(info) {
			continue
		}
		return ToolHit{Name: name, Dir: dir, Path: p, ControlDir: p + ".d", Info: info}, nil
	}
	return ToolHit{}, &os.PathError{Op: "lookup", Path: name, Err: errnoError{syscall.ENOENT, "tool not found in CTX_PATH"}}
}

// ListTools returns the tools visible through dirs: the first hit for each
// name, tier by tier, sorted by name within a tier, at most MaxListedTools.
// truncated reports that more tools were present. Unreadable or missing
// directories are skipped.
func ListTools(dirs []string) (hits []ToolHit, truncated bool) {
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
			tier = append(tier, ToolHit{Name: name, Dir: dir, Path: p, ControlDir: p + ".d", Info: info})
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
	for _, n := range names {
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
