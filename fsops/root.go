// Package fsops acts on the on-disk /ctx tree: it selects the root, reads
// control files bounded and without following symlinks, writes atomically
// and durably, appends events, and keeps sessions and run directories. Its
// sub-packages install objects (object), run the shared queue (queue) and
// processes (proc), apply sandbox plans (sandbox) and carry the run host's
// wire (broker). It never decides authority: that is package policy's job.
package fsops

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"ctx/policy"
)

// DefaultRoot is the root used when neither --root nor CTX_ROOT is given.
const DefaultRoot = "/ctx"

// Root is a /ctx tree on disk.
type Root struct {
	Dir string // absolute, cleaned
}

// SelectRoot picks the root directory: the --root flag when given, else
// $CTX_ROOT, else /ctx. The result is absolute and cleaned.
func SelectRoot(flag string, getenv func(string) string) Root {
	dir := flag
	if dir == "" {
		dir = getenv("CTX_ROOT")
	}
	if dir == "" {
		dir = DefaultRoot
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return Root{Dir: filepath.Clean(dir)}
}

// Path joins elements under the root.
func (r Root) Path(elem ...string) string {
	return filepath.Join(append([]string{r.Dir}, elem...)...)
}

// ToolDir is the system tool tier <root>/tool.
func (r Root) ToolDir() string { return r.Path("tool") }

// AgentDir is <root>/agent, holding system agent objects.
func (r Root) AgentDir() string { return r.Path("agent") }

// AgentNames lists the agents defined under the root: the directories
// agent/NAME.d whose NAME is a valid name, in name order.
func (r Root) AgentNames() ([]string, error) {
	entries, err := os.ReadDir(r.AgentDir())
	var names []string
	for _, en := range entries {
		if name, ok := strings.CutSuffix(en.Name(), ".d"); ok && en.IsDir() && policy.ValidName(name) == nil {
			names = append(names, name)
		}
	}
	return names, err
}

// AgentControl is <root>/agent/NAME.d.
func (r Root) AgentControl(name string) string { return r.Path("agent", name+".d") }

// Home is <root>/home/<uid>.
func (r Root) Home(uid int) string { return r.Path("home", strconv.Itoa(uid)) }

// UserToolDir is the user tool tier <root>/home/<uid>/tool.
func (r Root) UserToolDir(uid int) string { return r.Path("home", strconv.Itoa(uid), "tool") }

// AgentHome is <root>/home/<uid>/agent/NAME, the agent's durable home.
func (r Root) AgentHome(uid int, agent string) string {
	return r.Path("home", strconv.Itoa(uid), "agent", agent)
}

// SharedDir is <root>/shared/SPACE.
func (r Root) SharedDir(space string) string { return r.Path("shared", space) }

// DocsDir is <root>/shared/cortexfs-docs, the manual bundle.
func (r Root) DocsDir() string { return r.Path("shared", "cortexfs-docs") }

// DefaultToolPath is the CTX_PATH used when nothing else chooses one:
// <root>/tool:<root>/home/<uid>/tool.
func (r Root) DefaultToolPath(uid int) []string {
	return []string{r.ToolDir(), r.UserToolDir(uid)}
}
