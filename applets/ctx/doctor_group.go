package ctx

import (
	"fmt"
	"io"
	"strings"

	"ctx/applets/cli"
	"ctx/fsops"
)

// groupMin is the number of problems of one kind, under one top
// directory, with one fix, from which doctor prints them as one line: a
// half-written tree is hundreds of "missing" lines with the same fix.
const groupMin = 4

// printProblems prints the problems among findings, each with its fix
// (not when quiet). Problems of one status under one top directory of the
// tree (tool/, shared/) that share a fix are one line, "missing 328
// entries under tool/: tool/fs.read, tool/fs.read.d, ... (ctx doctor -v
// lists each)", at the place of the first; fewer than groupMin are listed
// one by one.
func printProblems(w io.Writer, root fsops.Root, findings []fsops.Finding, fixes map[fsops.Finding]string, quiet bool) {
	type key struct{ status, top, fix string }
	groups := map[key][]fsops.Finding{}
	var order []key
	for _, f := range findings {
		if f.Status == "ok" || (quiet && f.Status == "note") {
			continue // -q is problems only: nothing when all is ok
		}
		top, _, _ := strings.Cut(f.Rel, "/")
		k := key{f.Status, top, fixFor(root, f, fixes)}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], f)
	}
	for _, k := range order {
		g := groups[k]
		if len(g) < groupMin {
			for _, f := range g {
				fmt.Fprintln(w, cli.Escape(f.String()))
				if !quiet {
					fmt.Fprintln(w, "  fix: "+cli.Escape(k.fix))
				}
			}
			continue
		}
		var names []string
		for _, f := range g[:3] {
			names = append(names, f.Rel)
		}
		fmt.Fprintln(w, cli.Escape(fmt.Sprintf("%s %d entries under %s/: %s, ... (ctx doctor -v lists each)", k.status, len(g), k.top, strings.Join(names, ", "))))
		if !quiet {
			fmt.Fprintln(w, "  fix: "+cli.Escape(k.fix))
		}
	}
}
