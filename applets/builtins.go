package applets

import "sort"

// builtinTools are the tools implemented inside ctx, by name; the dispatch
// table (package applets) registers each as it makes the tool's row.
var builtinTools = map[string]*builtinTool{}

// ToolNames returns the names of the builtin tools, sorted.
func ToolNames() []string {
	names := make([]string, 0, len(builtinTools))
	for name := range builtinTools {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// The reference agents' policy subjects.
const (
	architectSubject = "architect_t"
	coderSubject     = "coder_t"
)

var (
	readersGrants = []string{architectSubject, coderSubject}
	writersGrants = []string{coderSubject}
)
