package ctx

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"ctx/applets/cli"
	"ctx/fsops"
)

// appendOnly are files ctx set never rewrites: histories and logs only grow.
var appendOnly = map[string]bool{"events.jsonl": true, "messages.jsonl": true, "log": true}

// RunSet is `ctx set [--root DIR] PATH VALUE`: replace one control file
// atomically. VALUE gets a final newline when it lacks one. Known controls
// are validated first; a bad value changes nothing.
func RunSet(e *cli.Env, args []string) int {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, 2, 2)
	if !ok {
		return code
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	p, err := root.ResolveABIPath(pos[0])
	if err != nil {
		return cli.Fail(e, cli.Usage, "%v", err)
	}
	if inSecretDir(root, p) {
		// A value on the command line is in ps for every user to see.
		return cli.Fail(e, cli.Usage, "%s: an agent's secrets are set with ctx secret set%s AGENT VAR, which reads the value from standard input", pos[0], root.Option())
	}
	value := pos[1]
	if value != "" && !strings.HasSuffix(value, "\n") {
		value += "\n"
	}
	name := filepath.Base(p)
	if appendOnly[name] {
		return cli.Fail(e, cli.Usage, "%s: append-only; ctx set never rewrites it", pos[0])
	}
	mode := fs.FileMode(0o644)
	st, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A new control may only appear in an existing control directory.
		if d, err := os.Lstat(filepath.Dir(p)); err != nil || !d.IsDir() || !strings.HasSuffix(filepath.Dir(p), ".d") {
			return cli.Fail(e, cli.Usage, "%s: no such control file, and its directory is not an existing NAME.d control directory", pos[0])
		}
	case err != nil:
		return cli.FailErr(e, cli.Failure, err)
	case !st.Mode().IsRegular():
		return cli.Fail(e, cli.Usage, "%s: not a regular file", pos[0])
	case st.Mode().Perm()&0o111 != 0:
		return cli.Fail(e, cli.Usage, "%s: an executable object, not a control file", pos[0])
	default:
		mode = st.Mode().Perm()
	}
	if err := validateControl(root, p, []byte(value)); err != nil {
		return cli.Fail(e, cli.Usage, "%s: %v", pos[0], err)
	}
	if err := fsops.WriteAtomic(p, []byte(value), mode); err != nil {
		return cli.FailErr(e, cli.Failure, err)
	}
	return cli.OK
}
