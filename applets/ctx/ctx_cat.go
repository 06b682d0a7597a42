package ctx

import (
	"io"
	"strings"

	"ctx/applets/cli"
	"ctx/fsops"
)

// RunCat is `ctx cat [--root DIR] PATH...`: print ABI files as they are. A
// symlink anywhere on the path, or a non-regular file, is refused, and so
// is every file of secret/: no value of an agent's secrets is shown.
func RunCat(e *cli.Env, args []string) int {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, 1, -1)
	if !ok {
		return code
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	code = cli.OK
	for _, arg := range pos {
		p, err := root.ResolveABIPath(arg)
		if err != nil {
			code = cli.Fail(e, cli.Failure, "%v", err)
			continue
		}
		if inSecretDir(root, p) {
			code = cli.Fail(e, cli.Usage, "%s: an agent's secrets are never printed (ctx secret list%s AGENT names them)", arg, root.Option())
			continue
		}
		fh, err := fsops.OpenRegular(p)
		if err != nil {
			code = cli.FailErr(e, cli.Failure, err)
			continue
		}
		_, err = io.Copy(e.Stdout, fh)
		fh.Close()
		if err != nil {
			code = cli.FailErr(e, cli.Failure, err)
		}
	}
	return code
}

// inSecretDir reports whether p (a path ResolveABIPath gave) is the tree's
// secret directory or inside it.
func inSecretDir(root fsops.Root, p string) bool {
	dir := root.SecretDir()
	return p == dir || strings.HasPrefix(p, dir+"/")
}
