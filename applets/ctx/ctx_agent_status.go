package ctx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/policy"
)

// effectiveStatus is the agent's status control, except that a run whose
// host is gone is dead whatever the file says.
func effectiveStatus(root fsops.Root, name string) (status string, pid int) {
	b, err := fsops.ReadControl(filepath.Join(root.AgentControl(name), "status"))
	status = strings.TrimSpace(string(b))
	if err != nil || status == "" {
		status = "idle"
	}
	pid = lifecycle.RunHostPid(root, name)
	switch status {
	case "start", "ready", "busy", "stopping":
		if pid == 0 {
			status = "dead"
		}
	}
	return status, pid
}

// RunAgentStatus is `ctx agent status [--root DIR] NAME`: the status on the
// first line, then key=value facts.
func RunAgentStatus(e *cli.Env, args []string) int {
	root, a, code, ok := lifecycle.AgentArgs(e, args, cli.NewFlags())
	if !ok {
		return code
	}
	status, pid := effectiveStatus(root, a.Name)
	children := 0
	for _, c := range lifecycle.ChildrenOf(root, a.Name) {
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
	fmt.Fprintf(e.Stdout, "%s\nmodel=%s\nlife=%s\nparent=%s\nchildren=%d\npid=%s\nuid=%d\ngid=%d\ngroups=%s\niso=%s\nsubject=%s\nperm=%s\nsession=%s\nbudget=%s\nprotect=%s\nnet_refused=%s\n",
		cli.Escape(status), cli.Escape(a.Model), a.Life, cli.Escape(a.Parent.String()), children, pidText, a.UID, a.GID, strings.Join(groups, ","),
		a.Isolation(uint32(os.Getuid())), cli.Escape(a.Subject), cli.Escape(a.Ceiling.String()), cli.Escape(session),
		cli.Escape(lastBudgetEvent(filepath.Join(root.AgentControl(a.Name), "log"))), lastProtectEvent(filepath.Join(root.AgentControl(a.Name), "log")),
		recentNetRefusals(filepath.Join(root.AgentControl(a.Name), "log")))
	return cli.OK
}

// budgetLogTail is how much of the end of agent/NAME.d/log status reads
// for the last budget event.
const budgetLogTail = 64 << 10

// lastBudgetEvent describes the last budget.exceeded event in the tail of
// the agent's log as "KEY VALUE at TS", or "-" when there is none. An
// event whose detail does not start with a budgets KEY=VALUE, or whose ts
// is not an event timestamp, is passed over: the line may not be the run
// host's.
func lastBudgetEvent(logPath string) string {
	out := "-"
	lastEvent(logPath, "budget.exceeded", func(ev fsops.Event) bool {
		key, value, ok := policy.ParseBudgetDetail(ev.Detail)
		if !ok {
			return false
		}
		out = key + " " + policy.FormatBudgetValue(value) + " at " + ev.TS
		return true
	})
	return out
}

// lastProtectEvent describes the last agent.stop event in the tail of the
// agent's log whose run moved protected paths aside (its detail begins
// "protect: "): "RUN at TS: DETAIL", escaped (the paths are the
// workspace's), or "-".
func lastProtectEvent(logPath string) string {
	out := "-"
	lastEvent(logPath, "agent.stop", func(ev fsops.Event) bool {
		if !strings.HasPrefix(ev.Detail, "protect: ") || !fsops.IsRunID(ev.Run) {
			return false
		}
		out = ev.Run + " at " + ev.TS + ": " + cli.Escape(strings.TrimPrefix(ev.Detail, "protect: "))
		return true
	})
	return out
}

// lastEvent hands the events of type typ in the last budgetLogTail bytes
// of the log to take, the last first, until it takes one. Lines that are
// not whole JSON events of that type, or whose ts is not an event
// timestamp, are passed over.
func lastEvent(logPath, typ string, take func(fsops.Event) bool) {
	f, err := fsops.OpenRegular(logPath)
	if err != nil {
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return
	}
	off := max(st.Size()-budgetLogTail, 0)
	buf := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(buf, off)
	buf = buf[:n]
	if off > 0 {
		// The first line is cut: skip it.
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		} else {
			buf = nil
		}
	}
	quoted := []byte(`"` + typ + `"`)
	for len(buf) > 0 {
		i := bytes.LastIndexByte(buf[:len(buf)-1], '\n')
		line := buf[i+1:]
		buf = buf[:i+1]
		if !bytes.Contains(line, quoted) {
			continue
		}
		var ev fsops.Event
		if json.Unmarshal(line, &ev) != nil || ev.Type != typ {
			continue
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", ev.TS); err != nil {
			continue
		}
		if take(ev) {
			return
		}
	}
}

// RunAgentPs is `ctx agent ps [--root DIR]`: every agent as a tree under
// its parent, one line each: NAME, status, pid, life, parent.
func RunAgentPs(e *cli.Env, args []string) int {
	var rootFlag string
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	if _, code, ok := cli.ParseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	names, err := root.AgentNames()
	if err != nil {
		return cli.Fail(e, cli.Failure, "%v", err)
	}
	agents := map[string]*policy.Agent{}
	var bad []string
	for _, name := range names {
		a, err := authority.LoadAgent(root, name)
		if err != nil {
			bad = append(bad, name+"\tinvalid\t"+cli.Escape(err.Error()))
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
		fmt.Fprintf(e.Stdout, "%s%s\t%s\tpid=%s\tlife=%s\tparent=%s%s\n", strings.Repeat("  ", depth), cli.Escape(name), cli.Escape(status), pidText, a.Life, cli.Escape(parent), foreignMark(root, name))
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
	return cli.OK
}

// foreignMark is ps's mark of an agent the caller may not start because
// another uid defined it or may change it (fsops.CheckAgentDef): a tab,
// "foreign: " and the reason; "" for the caller's own and trusted ones.
func foreignMark(root fsops.Root, name string) string {
	err := root.CheckAgentDef(name, uint32(os.Geteuid()))
	var fe *fsops.ForeignError
	if !errors.As(err, &fe) {
		return ""
	}
	return "\tforeign: " + cli.Escape(fe.Reason)
}

// recentNetRefusals describes the last netRefusalsShown connections the
// egress proxy refused, in the tail of the agent's log, the last first:
// "HOST:PORT LAYER at TS", joined by "; " and escaped (the names are the
// agent's), or "-".
func recentNetRefusals(logPath string) string {
	var out []string
	lastEvent(logPath, "net.connect", func(ev fsops.Event) bool {
		target, ok := strings.CutPrefix(ev.Object, "network:")
		if !ok || ev.Status != "denied" {
			return false
		}
		out = append(out, cli.Escape(target+" "+ev.Layer+" at "+ev.TS))
		return len(out) == netRefusalsShown
	})
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "; ")
}

// netRefusalsShown is how many refused connections status shows.
const netRefusalsShown = 3
