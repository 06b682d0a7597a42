package ctx

import (
	"fmt"
	"io/fs"
	"os"
	"sort"

	"ctx/applets/cli"
	"ctx/fsops"
)

// RunLs is `ctx ls [--root DIR] [ABI-PATH]`: the entries of one directory of
// the tree, sorted, marked like ls -F (/ directory, * executable, @ symlink,
// = socket, | FIFO). It reads the directory and nothing else.
func RunLs(e *cli.Env, args []string) int {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, 0, 1)
	if !ok {
		return code
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	arg := ""
	if len(pos) == 1 {
		arg = pos[0]
	}
	p, err := root.ResolveABIPath(arg)
	if err != nil {
		return cli.Fail(e, cli.Usage, "%v", err)
	}
	st, err := os.Lstat(p)
	if err != nil {
		return cli.FailErr(e, cli.Failure, err)
	}
	if !st.IsDir() {
		fmt.Fprintln(e.Stdout, cli.Escape(st.Name())+typeMark(st.Mode()))
		return cli.OK
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return cli.FailErr(e, cli.Failure, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, en := range entries {
		info, err := en.Info()
		if err != nil {
			continue
		}
		fmt.Fprintln(e.Stdout, cli.Escape(en.Name())+typeMark(info.Mode()))
	}
	return cli.OK
}

func typeMark(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "/"
	case m&fs.ModeSymlink != 0:
		return "@"
	case m&fs.ModeSocket != 0:
		return "="
	case m&fs.ModeNamedPipe != 0:
		return "|"
	case m.IsRegular() && m.Perm()&0o111 != 0:
		return "*"
	}
	return ""
}
