package applets

import (
	"regexp"
	"strings"
	"testing"

	"ctx/applets/cli"
	"ctx/manual"
)

// synopsisVerbs returns the verbs the synopsis of page shows after cmd: the
// first word that is not a bracketed option, when it is a lowercase word
// (NAME, FILE and the like are operands, not verbs).
func synopsisVerbs(t *testing.T, page, cmd string) []string {
	t.Helper()
	text, ok := manual.Synopsis(page)
	if !ok {
		t.Fatalf("%s: no synopsis", page)
	}
	verb := regexp.MustCompile(`^[a-z][a-z0-9.-]*$`)
	seen := map[string]bool{}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(l, cmd+" ")
		if !ok {
			continue
		}
		depth := 0
		for _, w := range strings.Fields(rest) {
			if depth == 0 && !strings.HasPrefix(w, "[") {
				if verb.MatchString(w) && !seen[w] {
					seen[w] = true
					out = append(out, w)
				}
				break
			}
			depth += strings.Count(w, "[") - strings.Count(w, "]")
		}
	}
	return out
}

// TestEveryVerbHasHelp: `ctx CMD VERB --help` and `APPLET VERB --help` print
// what the verb does and its synopsis, for every verb a synopsis shows, and
// so do ctx's own options (--install, --list, --version).
func TestEveryVerbHasHelp(t *testing.T) {
	type call struct {
		argv []string
		want string // the title line's start
	}
	var calls []call
	for _, c := range CommandNames() {
		for _, v := range synopsisVerbs(t, "ctx-"+c, "ctx "+c) {
			calls = append(calls, call{[]string{"ctx", c, v, "--help"}, "ctx " + c + " " + v + " - "})
		}
	}
	for _, name := range Names() {
		a, _ := lookup(name)
		if a.Tool || name == "ctx" {
			continue
		}
		for _, v := range synopsisVerbs(t, name, name) {
			calls = append(calls, call{[]string{name, v, "--help"}, name + " " + v + " - "})
		}
	}
	for _, opt := range []string{"--install", "--list", "--version"} {
		calls = append(calls, call{[]string{"ctx", opt, "--help"}, "ctx " + opt + " - "})
	}
	calls = append(calls, call{[]string{"ctx", "-V", "--help"}, "ctx --version - "})
	if len(calls) < 30 {
		t.Fatalf("only %d verbs found in the synopses; the scan is broken", len(calls))
	}
	for _, c := range calls {
		e, out, errb := cli.BufferEnv("", nil)
		code := dispatch(e, c.argv[0], c.argv[1:])
		title, _, _ := strings.Cut(out.String(), "\n")
		if code != 0 || !strings.HasPrefix(title, c.want) || len(title) < len(c.want)+10 {
			t.Errorf("%s: exit %d, title %q, want %q and what it does\n%s", strings.Join(c.argv, " "), code, title, c.want, errb.String())
		}
	}
}

// TestToolVerbHelpIsTheTools: a tool's arguments are its own, so `tsh
// fs.read --help` is not turned into help for a verb of tsh.
func TestToolVerbHelpIsTheTools(t *testing.T) {
	if _, ok := manual.VerbHelp("tsh", "tsh", "fs.read"); ok {
		t.Fatal("tsh fs.read --help would print tsh's help")
	}
}
