package applets

import (
	"sort"
	"strings"
	"testing"

	"ctx/applets/toolrun"
	"ctx/fsops/sandbox"
	"ctx/manual"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

func TestTableSortedAndUnique(t *testing.T) {
	for i := 1; i < len(table); i++ {
		if table[i-1].Name >= table[i].Name {
			t.Errorf("applet table not sorted or duplicate: %q before %q", table[i-1].Name, table[i].Name)
		}
	}
	for i := 1; i < len(ctxCommands); i++ {
		if ctxCommands[i-1].Name >= ctxCommands[i].Name {
			t.Errorf("ctx commands not sorted or duplicate: %q before %q", ctxCommands[i-1].Name, ctxCommands[i].Name)
		}
	}
	for _, a := range table {
		if _, ok := lookupCommand(a.Name); ok {
			t.Errorf("%q is both an applet and a ctx command", a.Name)
		}
	}
}

// TestManualMatchesTable keeps the manual in step with the applet table: every
// visible applet and every ctx command has a page with a synopsis, and every
// page that is not a topic documents an applet or a command.
func TestManualMatchesTable(t *testing.T) {
	documented := map[string]bool{}
	for _, name := range Names() {
		documented[name+".md"] = true
		if _, ok := manual.Synopsis(name); !ok {
			t.Errorf("applet %s: no manual page with a SYNOPSIS block (manual/%s.md)", name, name)
		}
		if manual.Summary(name) == "" {
			t.Errorf("applet %s: page title lacks \"# %s - summary\"", name, name)
		}
	}
	for _, c := range CommandNames() {
		page := "ctx-" + c
		documented[page+".md"] = true
		if _, ok := manual.Synopsis(page); !ok {
			t.Errorf("ctx %s: no manual page with a SYNOPSIS block (manual/%s.md)", c, page)
		}
	}
	for _, f := range manual.Files() {
		if isTopic(f) || documented[f] {
			continue
		}
		t.Errorf("manual/%s documents no applet or ctx command", f)
	}
	for _, a := range table {
		if a.Tool {
			if _, ok := toolrun.BuiltinTools[a.Name]; !ok {
				t.Errorf("tool applet %s has no builtin tool metadata (description, schema, cap)", a.Name)
			}
		}
	}
}

func TestManualAliasesResolve(t *testing.T) {
	for _, topic := range []string{"agent", "tool", "session", "ctx", "root", "model", "provider", "coreutils",
		"policy", "shared", "queue", "sandbox", "mnt", "mcp", "agentrc", "recipes"} {
		f, ok := manual.Resolve(topic)
		if !ok {
			t.Errorf("ctx man %s: no page", topic)
			continue
		}
		if !strings.HasPrefix(f, "ctx.") {
			t.Errorf("ctx man %s resolved to %s, want a ctx.* topic", topic, f)
		}
	}
	for _, c := range CommandNames() {
		if f, ok := manual.Resolve(c); !ok || f != "ctx-"+c+".md" && !isTopic(f) {
			t.Errorf("ctx man %s resolved to %q", c, f)
		}
	}
}

func TestToolNamesSorted(t *testing.T) {
	names := toolrun.ToolNames()
	if !sort.StringsAreSorted(names) || len(names) == 0 {
		t.Fatalf("ToolNames() = %v", names)
	}
}

// TestManualSandboxListsEveryWall keeps `ctx man sandbox` in step with
// what the code enforces: every syscall the seccomp filter refuses, every
// /proc file it masks or makes read-only, and every host /etc entry.
func TestManualSandboxListsEveryWall(t *testing.T) {
	page, ok := manual.Read("ctx.sandbox.md")
	if !ok {
		t.Fatal("no ctx.sandbox.md")
	}
	text := strings.Join(strings.Fields(string(page)), " ")
	var want []string
	for _, n := range sandbox.SeccompDeniedNames() {
		if name, flag, ok := strings.Cut(strings.TrimSuffix(n, ")"), "("); ok {
			// clone(CLONE_NEWUSER) is listed as the flag; ioctl(TIOCSTI)
			// as the request; personality(...) by its name.
			if name == "clone" || name == "ioctl" {
				want = append(want, strings.TrimPrefix(flag, "CLONE_"))
				continue
			}
			n = name
		}
		want = append(want, n)
	}
	want = append(want, sandboxplan.ProcMasked()...)
	want = append(want, sandboxplan.ProcReadOnly()...)
	for _, e := range sandboxplan.HostEtcNames {
		if e != "ca-certificates" && e != "ca-certificates.conf" {
			want = append(want, "`"+e)
		}
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("ctx man sandbox does not mention %s", w)
		}
	}
}

// TestManualAgentListsEveryBudget keeps the BUDGETS table of `ctx man
// agent` in step with policy.BudgetKeys: every key, with its default.
func TestManualAgentListsEveryBudget(t *testing.T) {
	page, ok := manual.Read("ctx.agent.md")
	if !ok {
		t.Fatal("no ctx.agent.md")
	}
	lines := strings.Split(string(page), "\n")
	for _, k := range policy.BudgetKeys {
		want := policy.FormatBudgetValue(k.Default)
		if k.Bytes {
			for _, u := range []struct {
				suffix string
				size   uint64
			}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
				if k.Default%u.size == 0 {
					want = policy.FormatBudgetValue(k.Default/u.size) + u.suffix
					break
				}
			}
		}
		found := false
		for _, l := range lines {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == k.Name && f[1] == want {
				found = true
			}
		}
		if !found {
			t.Errorf("ctx man agent has no line %q with default %s", k.Name, want)
		}
	}
}

// CommandNames returns the ctx subcommand names in order.
func CommandNames() []string {
	names := make([]string, len(ctxCommands))
	for i, c := range ctxCommands {
		names[i] = c.Name
	}
	return names
}

// isTopic reports whether a page file belongs to the ctx.* topic namespace.
func isTopic(file string) bool {
	return strings.HasPrefix(file, "ctx.") && file != "ctx.md"
}
