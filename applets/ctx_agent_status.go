package applets

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"ctx/applets/authority"
	"ctx/fsops"
	"ctx/policy"
	"ctx/ptyterm"
)

// effectiveStatus is the agent's status control, except that a run whose
// host is gone is dead whatever the file says.
func effectiveStatus(root fsops.Root, name string) (status string, pid int) {
	b, err := fsops.ReadControl(filepath.Join(root.AgentControl(name), "status"))
	status = strings.TrimSpace(string(b))
	if err != nil || status == "" {
		status = "idle"
	}
	pid = runHostPid(root, name)
	switch status {
	case "start", "ready", "busy", "stopping":
		if pid == 0 {
			status = "dead"
		}
	}
	return status, pid
}

// runAgentStatus is `ctx agent status [--root DIR] NAME`: the status on the
// first line, then key=value facts.
func runAgentStatus(e *Env, args []string) int {
	root, a, code, ok := agentArgs(e, args, newFlags())
	if !ok {
		return code
	}
	status, pid := effectiveStatus(root, a.Name)
	children := 0
	for _, c := range childrenOf(root, a.Name) {
		if s, _ := effectiveStatus(root, c.Name); s != "dead" && s != "idle" {
			children++
		}
	}
	pidText := ""
	if pid > 0 {
		pidText = fmt.Sprint(pid)
	}
	groups := make([]string, len(a.Groups))
	for i, g := range a.Groups {
		groups[i] = fmt.Sprint(g)
	}
	session := root.CurrentSession(int(a.UID), a.Name)
	fmt.Fprintf(e.Stdout, "%s\nmodel=%s\nlife=%s\nparent=%s\nchildren=%d\npid=%s\nuid=%d\ngid=%d\ngroups=%s\niso=%s\nsubject=%s\nperm=%s\nsession=%s\n",
		status, a.Model, a.Life, a.Parent, children, pidText, a.UID, a.GID, strings.Join(groups, ","),
		a.Isolation(uint32(os.Getuid())), a.Subject, a.Ceiling, session)
	return exitOK
}

// runAgentPs is `ctx agent ps [--root DIR]`: every agent as a tree under
// its parent, one line each: NAME, status, pid, life, parent.
func runAgentPs(e *Env, args []string) int {
	var rootFlag string
	f := newFlags()
	f.String("root", &rootFlag)
	if _, code, ok := parseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	entries, err := os.ReadDir(root.AgentDir())
	if err != nil {
		return fail(e, exitFailure, "%v", err)
	}
	agents := map[string]*policy.Agent{}
	var bad []string
	for _, en := range entries {
		name, ok := strings.CutSuffix(en.Name(), ".d")
		if !ok || !en.IsDir() || policy.ValidName(name) != nil {
			continue
		}
		a, err := authority.LoadAgent(root, name)
		if err != nil {
			bad = append(bad, name+"\tinvalid\t"+ptyterm.Escape(err.Error()))
			continue
		}
		agents[name] = a
	}
	kids := map[string][]string{}
	var tops []string
	for name, a := range agents {
		if p := a.Parent.Agent; p != "" && agents[p] != nil && p != name {
			kids[p] = append(kids[p], name)
		} else {
			tops = append(tops, name)
		}
	}
	sort.Strings(tops)
	seen := map[string]bool{}
	var walk func(name string, depth int)
	walk = func(name string, depth int) {
		if seen[name] {
			return
		}
		seen[name] = true
		a := agents[name]
		status, pid := effectiveStatus(root, name)
		pidText := "-"
		if pid > 0 {
			pidText = fmt.Sprint(pid)
		}
		parent := a.Parent.String()
		if parent == "" {
			parent = "-"
		}
		fmt.Fprintf(e.Stdout, "%s%s\t%s\tpid=%s\tlife=%s\tparent=%s\n", strings.Repeat("  ", depth), name, status, pidText, a.Life, parent)
		sort.Strings(kids[name])
		for _, k := range kids[name] {
			walk(k, depth+1)
		}
	}
	for _, t := range tops {
		walk(t, 0)
	}
	// Agents caught in a parent cycle are not reachable from a top: list
	// them too, flat.
	var rest []string
	for name := range agents {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	for _, n := range rest {
		walk(n, 0)
	}
	for _, b := range bad {
		fmt.Fprintln(e.Stdout, b)
	}
	return exitOK
}
