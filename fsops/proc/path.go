package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotFound is LookPath's error for a name found in no directory.
var ErrNotFound = errors.New("not found")

// EnvPath is the value of PATH in env (the last one wins, as getenv does
// for a duplicated name), or def when env has none. A program ctx starts
// is looked up in the PATH of the environment it will run with (the
// agent's, an MCP server's), never in ctx's own: that one may differ, or,
// inside the sandbox init, not describe the sandbox at all.
func EnvPath(env []string, def string) string {
	path := def
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return path
}

// LookPath finds name in path, a PATH value, as a shell would: a name with
// a slash is returned as it is; otherwise the first regular file with an
// execute bit in a directory of path. Relative directories (and the empty
// entry, which means ".") are skipped: what they find would depend on the
// current directory of whoever runs the program. The error is ErrNotFound.
func LookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNotFound
}
