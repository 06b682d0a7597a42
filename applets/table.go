package applets

import "sort"

// The table is filled in init, not in a composite literal, because the ctx
// applet lists the table and a literal would be an initialization cycle
// (cmd/go fills its command list in init for the same reason).
func init() {
	table = []Applet{
		{Name: "ctx", Run: runCtx},
		{Name: "ctxterm", Run: runCtxterm},
	}
	sort.Slice(table, func(i, j int) bool { return table[i].Name < table[j].Name })

	ctxCommands = []subcommand{
		{"man", runMan},
		{"validate-name", runValidateName},
	}
	sort.Slice(ctxCommands, func(i, j int) bool { return ctxCommands[i].Name < ctxCommands[j].Name })
}
