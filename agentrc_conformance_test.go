package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestAgentrcStatementMatchesSuite keeps ctx's support statement for the
// agentrc /mnt profile (manual/ctx.agentrc.md) and its conformance suite
// (testdata/script/agentrc_SECTION.txtar) in step: every requirement the
// statement lists has exactly one case, in the file of its section, marked
// with the same status, and every case is a requirement of the statement.
// The cases themselves run with the other scripts (TestScripts), inside
// real sandboxes.
func TestAgentrcStatementMatchesSuite(t *testing.T) {
	page, err := os.ReadFile("manual/ctx.agentrc.md")
	if err != nil {
		t.Fatal(err)
	}
	item := regexp.MustCompile(`(?m)^- \*\*([a-z]+\.[a-z-]+)\*\* \((MUST|SHOULD|MAY), (supported|partially|not)\):`)
	statement := map[string]string{}
	for _, m := range item.FindAllStringSubmatch(string(page), -1) {
		if _, dup := statement[m[1]]; dup {
			t.Errorf("statement: %s listed twice", m[1])
		}
		statement[m[1]] = m[3]
	}
	if len(statement) < 30 {
		t.Fatalf("statement: only %d requirements found; is the list format still \"- **ID** (LEVEL, STATUS):\"?", len(statement))
	}
	// Every bullet of the SUPPORT STATEMENT section is a requirement in
	// the form above: a typo must not drop one from the check.
	if _, section, ok := strings.Cut(string(page), "\n## SUPPORT STATEMENT\n"); ok {
		section, _, _ = strings.Cut(section, "\n## ")
		for _, line := range strings.Split(section, "\n") {
			if strings.HasPrefix(line, "- ") && !item.MatchString(line) {
				t.Errorf("statement: a bullet that is not a requirement: %s", line)
			}
		}
	} else {
		t.Fatal("statement: no SUPPORT STATEMENT section")
	}

	files, err := filepath.Glob("testdata/script/agentrc_*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no suite files: %v", err)
	}
	marker := regexp.MustCompile(`(?m)^# agentrc ([a-z]+\.[a-z-]+) \((supported|partially|not)\): \S`)
	cases := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\n[!sandbox] skip\n") {
			t.Errorf("%s: not a sandbox script ([!sandbox] skip), so it could skip where sandboxes are required", f)
		}
		section := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "agentrc_"), ".txtar")
		for _, m := range marker.FindAllStringSubmatch(string(b), -1) {
			id, status := m[1], m[2]
			if _, dup := cases[id]; dup {
				t.Errorf("%s: a second case for %s", f, id)
			}
			cases[id] = status
			if prefix, _, _ := strings.Cut(id, "."); prefix != section {
				t.Errorf("%s: case %s belongs in agentrc_%s.txtar", f, id, prefix)
			}
			want, ok := statement[id]
			switch {
			case !ok:
				t.Errorf("%s: case %s is no requirement of ctx man agentrc", f, id)
			case want != status:
				t.Errorf("%s: case %s says %s, the statement %s", f, id, status, want)
			}
		}
	}
	var missing []string
	for id := range statement {
		if _, ok := cases[id]; !ok {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	for _, id := range missing {
		t.Errorf("requirement %s has no case in testdata/script/agentrc_*.txtar", id)
	}
}
