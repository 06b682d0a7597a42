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

// inProcessTools are the builtin tools whose calls run wholly in the tool
// process: they start no process and leave nothing running.
var inProcessTools = map[*BuiltinTool]bool{FsReadTool: true, FsListTool: true, FsStatTool: true,
	FsWriteTool: true, FsReplaceTool: true}

// StaysForAnother reports whether a tool worker ordered to run argv may
// take another call after it (toolworker.NextOrder): a call of an
// in-process tool with its input as arguments, not a flag such as --help.
// Whether the call left the process as it found it is checked after it.
func StaysForAnother(argv []string) bool {
	if len(argv) == 0 || !inProcessTools[BuiltinTools[argv[0]]] {
		return false
	}
	for _, a := range argv[1:] {
		if len(a) > 0 && a[0] == '-' {
			return false
		}
	}
	return true
}
