package applets

import (
	"slices"
	"testing"

	"ctx/applets/cli"
	"ctx/manual"
)

// TestTableVerbsMatchManual: the verbs a row of the table dispatches and
// the verbs its page's synopsis shows are the same set, so that every verb
// the table runs has `CMD VERB --help`, and no documented verb is missing
// from the table.
func TestTableVerbsMatchManual(t *testing.T) {
	type cmd struct {
		row   cli.Applet
		title string
	}
	var rows []cmd
	for _, a := range table {
		if a.Name != "ctx" && a.Verbs != nil {
			rows = append(rows, cmd{a, a.Name})
		}
	}
	for _, c := range ctxCommands {
		if c.Verbs != nil {
			rows = append(rows, cmd{c, "ctx " + c.Name})
		}
	}
	if len(rows) < 4 {
		t.Fatalf("only %d rows with verbs", len(rows))
	}
	for _, c := range rows {
		if c.row.Run != nil {
			t.Errorf("%s has both verbs and a Run: the verbs would never run", c.title)
		}
		documented := synopsisVerbs(t, c.row.Page, c.title)
		var dispatched []string
		for _, v := range c.row.Verbs {
			dispatched = append(dispatched, v.Name)
			if _, ok := manual.VerbHelp(c.row.Page, c.title, v.Name); !ok {
				t.Errorf("%s %s: no help in manual/%s.md", c.title, v.Name, c.row.Page)
			}
		}
		slices.Sort(documented)
		slices.Sort(dispatched)
		if !slices.Equal(documented, dispatched) {
			t.Errorf("%s: the synopsis shows verbs %v, the table runs %v", c.title, documented, dispatched)
		}
	}
}

// TestVerbErrors: a missing or unknown verb is a usage error (exit 2)
// worded as each command has always worded it, under the command's name.
func TestVerbErrors(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"ctx", "agent"}, "ctx agent: missing verb (attach, children, env, new, ps, start, status, stop, watch) (see \"ctx agent --help\")"},
		{[]string{"ctx", "agent", "frob"}, "ctx agent: unknown verb frob (attach, children, env, new, ps, start, status, stop, watch) (see \"ctx agent --help\")"},
		{[]string{"ctx", "policy", "frob"}, "ctx policy: unknown verb frob (allow, check, explain, revoke) (see \"ctx policy --help\")"},
		{[]string{"ctx", "shared"}, "ctx shared: missing verb (new) (see \"ctx shared --help\")"},
		{[]string{"ctx", "shared", "frob"}, `ctx shared: unknown verb "frob" (new) (see "ctx shared --help")`},
		{[]string{"ctx", "object"}, "ctx object: missing verb: check, install, inspect or uninstall (see \"ctx object --help\")"},
		{[]string{"ctx", "object", "frob"}, `ctx object: unknown verb "frob" (want check, install, inspect or uninstall) (see "ctx object --help")`},
		{[]string{"ctx", "queue"}, "ctx queue: missing verb (publish, claim, finish, recover, status, check, ingest, exec) (see \"ctx queue --help\")"},
		{[]string{"ctx", "queue", "frob"}, `ctx queue: unknown verb "frob" (see "ctx queue --help")`},
		{[]string{"ctxmcp"}, "ctxmcp: missing verb: list, project or serve (see \"ctxmcp --help\")"},
		{[]string{"ctxmcp", "frob"}, `ctxmcp: unknown verb "frob" (want list, project or serve) (see "ctxmcp --help")`},
	} {
		e, _, errb := cli.BufferEnv("", nil)
		code := dispatch(e, c.argv[0], c.argv[1:])
		first := errb.String()
		if i := slices.Index([]byte(first), '\n'); i >= 0 {
			first = first[:i]
		}
		if code != cli.Usage || first != c.want {
			t.Errorf("%v: exit %d, %q; want 2, %q", c.argv, code, first, c.want)
		}
	}
}
