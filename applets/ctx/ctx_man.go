package ctx

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/manual"
)

// RunMan is `ctx man [--root DIR] [TOPIC]`: it prints the bundle copy under
// the root when present and the compiled-in page otherwise. Without a topic
// it lists the pages. It never starts a pager.
func RunMan(e *cli.Env, args []string) int {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	pos, code, ok := cli.ParseArgs(e, f, args, 0, 1)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		for _, file := range manual.Files() {
			name := strings.TrimSuffix(file, ".md")
			fmt.Fprintf(e.Stdout, "%s\t%s\n", name, manual.Summary(name))
		}
		return cli.OK
	}
	file, ok := manual.Resolve(pos[0])
	if !ok {
		return cli.Fail(e, cli.NotFound, "no manual page for %q (try: ctx man)", pos[0])
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	installed := filepath.Join(root.DocsDir(), "man", file)
	b, err := fsops.ReadRegular(installed, 1<<20)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		b, _ = manual.Read(file)
	default:
		// A bundle file that exists but cannot be read safely (a symlink,
		// too large) is reported, not silently replaced by another text.
		return cli.Fail(e, cli.Failure, "%v", err)
	}
	e.Stdout.Write(b)
	return cli.OK
}
