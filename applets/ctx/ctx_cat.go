package ctx

import (
	"io"

	"ctx/applets/cli"
	"ctx/fsops"
)

// RunCat is `ctx cat [--root DIR] PATH...`: print ABI files as they are. A
// symlink anywhere on the path, or a non-regular file, is refused.
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
