package fsops

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ResolveABIPath maps a path a user typed to a path under the root: an ABI
// path ("/ctx/tool/fs.read", re-rooted under a custom root), an absolute path
// already inside the root, or a path relative to the root ("tool/fs.read").
// ".." components are refused, and so is every symlink on the way down from
// the root: the ABI is walked, never followed.
func (r Root) ResolveABIPath(p string) (string, error) {
	rel := p
	switch {
	case p == DefaultRoot || strings.HasPrefix(p, DefaultRoot+"/"):
		rel = strings.TrimPrefix(p, DefaultRoot)
	case filepath.IsAbs(p):
		rel = r.RelPath(filepath.Clean(p))
		if rel == "" {
			return "", &os.PathError{Op: "resolve", Path: p, Err: errnoError{syscall.EXDEV, "outside the ctx root " + r.Dir}}
		}
	}
	rel = strings.Trim(rel, "/")
	cur := r.Dir
	var comps []string
	for _, c := range strings.Split(rel, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return "", &os.PathError{Op: "resolve", Path: p, Err: errnoError{syscall.EINVAL, `".." is not allowed in an ABI path`}}
		}
		comps = append(comps, c)
	}
	for i, c := range comps {
		cur = filepath.Join(cur, c)
		st, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			// The rest may be created by the caller (ctx set); nothing below
			// a missing component can be a symlink.
			return filepath.Join(append([]string{cur}, comps[i+1:]...)...), nil
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return "", &os.PathError{Op: "resolve", Path: cur, Err: ErrSymlink}
		}
	}
	return cur, nil
}
