package toolrun

import "sort"

// BuiltinTools are the tools implemented inside ctx, by name: this
// package's own and the agent.* tools package runhost registers. The
// dispatch table (package applets) makes a row of each.
var BuiltinTools = map[string]*BuiltinTool{}

// Register adds t to BuiltinTools; each package registers its tools in init.
func Register(tools ...*BuiltinTool) {
	for _, t := range tools {
		BuiltinTools[t.Name] = t
	}
}

func init() {
	Register(FsReadTool, FsListTool, FsStatTool, FsWriteTool, FsReplaceTool, ShellExecTool,
		BashTool, TmuxTool, ZellijTool, TshTool, TshConfigTool)
}

// ToolNames returns the names of the builtin tools, sorted.
func ToolNames() []string {
	names := make([]string, 0, len(BuiltinTools))
	for name := range BuiltinTools {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// The reference agents' policy subjects.
const (
	ArchitectSubject = "architect_t"
	CoderSubject     = "coder_t"
)

var (
	readersGrants = []string{ArchitectSubject, CoderSubject}
	writersGrants = []string{CoderSubject}
)
