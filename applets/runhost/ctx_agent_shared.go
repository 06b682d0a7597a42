package runhost

import (
	"os"
	"path/filepath"
	"strings"

	"ctx/applets/cli"
)

// resolveSharedProgram finds a command name given without a slash in the
// PATH the program will run with, as a sandboxed run finds it inside the
// sandbox, and not in the PATH of whoever ran ctx agent start: `-- tsh`
// is the root's bin/tsh. A name found nowhere on that PATH is refused
// before anything starts (exit 127).
func (r *AgentRun) resolveSharedProgram(e *cli.Env) (int, bool) {
	name := r.argv[0]
	if name == "" || strings.Contains(name, "/") {
		return 0, true
	}
	path := ""
	for _, kv := range r.env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // an empty or relative entry would mean the workspace
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			r.argv[0] = p
			return 0, true
		}
	}
	return cli.Fail(e, cli.NotFound, "agent %s: %s: not found in the program's PATH (%s)",
		r.Agent.Name, cli.Escape(name), cli.Escape(path)), false
}
