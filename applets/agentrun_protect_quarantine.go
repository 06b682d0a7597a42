package applets

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// The end of a run's look at the protected paths (DESIGN §16 rule 11).
// The read-only mounts and Landlock rules keep what existed; what they
// cannot stop (a path that did not exist, a new repository's config, a
// directory renamed around a mount, every path in iso shared) is found by
// a second census. Every protected file or symlink the run created or
// changed is moved aside under a name no host tool loads
// (policy.QuarantineSuffix), never deleted, and the start's copy is put
// back where there was one. The sandbox is gone by now: nothing of the
// run changes them any more.

// maxProtectLines bounds the lines the end prints on stderr.
const maxProtectLines = 40

// protectChange is one thing the end found and what it did.
type protectChange struct {
	rel, what string
}

func (c protectChange) String() string { return c.rel + ": " + c.what }

// protectQuarantine takes the census again, compares it with the start's
// and acts on each difference.
func (r *agentRun) protectQuarantine() []protectChange {
	st := r.protect
	if st == nil || st.start == nil {
		return nil
	}
	end := takeCensus(r.workspace, st.set, st.mounts, false)
	q := &quarantine{ws: r.workspace, suffix: policy.QuarantineSuffix(r.runID)}
	moved := st.start.movedTo(end)
	for _, rel := range sortedKeys(end.items) {
		was := st.start.items[rel]
		switch {
		case was == nil && moved[rel] != "":
			q.note(rel, "moved here unchanged from "+moved[rel]+", left in place")
		case was == nil:
			q.aside(rel, "created")
		case !was.same(end.items[rel]):
			if q.aside(rel, "changed") {
				q.restore(rel, was)
			}
		}
	}
	gone := map[string]bool{}
	for _, from := range moved {
		gone[from] = true
	}
	for _, rel := range sortedKeys(st.start.items) {
		if end.items[rel] == nil && !gone[rel] {
			q.note(rel, "removed")
			q.restore(rel, st.start.items[rel])
		}
	}
	if st.start.truncated || end.truncated {
		q.note(".", fmt.Sprintf("census stopped after %d protected paths: deeper ones were not compared", maxProtectItems))
	}
	return q.changes
}

// movedTo finds the protected objects of the start that stand unchanged
// at a new protected path (a directory renamed around them, with or
// without something new put at the old path): new path -> old path.
func (c *protectCensus) movedTo(end *protectCensus) map[string]string {
	type key struct{ dev, ino uint64 }
	gone := map[key]string{}
	for rel, it := range c.items {
		if now := end.items[rel]; now == nil || !now.same(it) {
			gone[key{it.st.Dev, it.st.Ino}] = rel
		}
	}
	out := map[string]string{}
	for rel, it := range end.items {
		if from, ok := gone[key{it.st.Dev, it.st.Ino}]; ok && c.items[rel] == nil && c.items[from].same(it) {
			out[rel] = from
			delete(gone, key{it.st.Dev, it.st.Ino})
		}
	}
	return out
}

// quarantine is the end's work in progress.
type quarantine struct {
	ws, suffix string
	changes    []protectChange
}

func (q *quarantine) note(rel, what string) { q.changes = append(q.changes, protectChange{rel, what}) }

// aside moves rel to its quarantine name and says so.
func (q *quarantine) aside(rel, why string) bool {
	to, err := fsops.QuarantineAside(q.ws, rel, q.suffix)
	if err != nil {
		q.note(rel, why+", NOT moved aside: "+err.Error())
		return false
	}
	q.note(rel, why+", quarantined as "+to)
	return true
}

// restore puts back the start's copy of rel, moving aside whatever stands
// there now (a directory in place of a file).
func (q *quarantine) restore(rel string, was *protectItem) {
	last := &q.changes[len(q.changes)-1]
	if was.orig == nil {
		last.what += fmt.Sprintf("; the original was not kept (over %d bytes, or unreadable), nothing put back", maxProtectKeep)
		return
	}
	err := fsops.RestoreOriginal(q.ws, rel, *was.orig)
	if os.IsExist(err) {
		if to, aerr := fsops.QuarantineAside(q.ws, rel, q.suffix); aerr == nil {
			last.what += "; what stood there quarantined as " + to
			err = fsops.RestoreOriginal(q.ws, rel, *was.orig)
		}
	}
	if err != nil {
		last.what += "; the original could NOT be put back: " + err.Error()
		return
	}
	last.what += "; original restored"
}

func sortedKeys(m map[string]*protectItem) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// warnProtect runs the end's census once the run is over and prints what
// it found and did, one line each; protectDetail gives the same for the
// agent.stop event (and so for ctx agent status).
func (r *agentRun) warnProtect(e *Env) {
	if r.protect == nil {
		return
	}
	if r.protect.rulesFile != "" {
		os.Remove(r.protect.rulesFile) // ctx-confine's, if it did not get to it
	}
	changes := r.protectQuarantine()
	r.protect.found = nil
	for _, c := range changes {
		r.protect.found = append(r.protect.found, c.String())
	}
	if len(changes) == 0 {
		return
	}
	cli.Errorf(e.Stderr, "ctx agent", "%s: protect: this run changed what host tools load by themselves in the workspace %s (%d findings below); what it created or changed is moved aside, never deleted: check it before taking it back with mv QUARANTINED ORIGINAL (ctx man sandbox)",
		r.agent.Name, r.workspace, len(changes))
	for i, c := range changes {
		if i == maxProtectLines {
			cli.Errorf(e.Stderr, "ctx agent", "%s: protect: and %d more (the agent.stop event lists them)", r.agent.Name, len(changes)-i)
			break
		}
		cli.Errorf(e.Stderr, "ctx agent", "%s: protect: %s", r.agent.Name, c)
	}
}

func (r *agentRun) protectDetail() string {
	if r.protect == nil || len(r.protect.found) == 0 {
		return ""
	}
	return "protect: " + strings.Join(r.protect.found, "; ")
}
