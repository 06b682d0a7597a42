package runhost

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

// protectQuarantine takes the census again and acts on each difference
// with the start's as it finds it; then it puts back what is gone.
func (r *AgentRun) protectQuarantine() []protectChange {
	st := r.protect
	if st == nil || st.start == nil {
		return nil
	}
	start := st.start
	q := &quarantine{ws: r.workspace, suffix: policy.QuarantineSuffix(r.RunID)}
	byIno := map[inoKey]string{}
	for rel, it := range start.Items {
		byIno[inoKey{it.St.Dev, it.St.Ino}] = rel
	}
	seen, moved := map[string]bool{}, map[string]bool{}
	end := &fsops.ProtectCensus{Workspace: r.workspace, Set: st.set, Mounts: st.mounts}
	end.Visit = func(rel string, now *fsops.ProtectItem) {
		was := start.Items[rel]
		switch {
		case was != nil && was.Same(now):
			seen[rel] = true
		case was != nil:
			seen[rel] = true
			if q.aside(rel, "changed") {
				q.restore(rel, was)
			}
		default:
			// The start's object, unchanged, at a new path: a directory
			// renamed around it.
			if from, ok := byIno[inoKey{now.St.Dev, now.St.Ino}]; ok && start.Items[from].Same(now) {
				moved[from] = true
				q.note(rel, "moved here unchanged from "+from+", left in place")
				return
			}
			q.aside(rel, "created")
		}
	}
	end.Walk()
	for _, p := range end.Repaired {
		q.note(p, "the run took its owner's read or search permission away; given back (u+rx) to compare what it holds")
	}
	for _, rel := range sortedKeys(start.Items) {
		if !seen[rel] && !moved[rel] {
			q.note(rel, "removed")
			q.restore(rel, start.Items[rel])
		}
	}
	if start.Truncated {
		q.note(".", fmt.Sprintf("the start recorded the first %d protected paths only: any other was moved aside as created", fsops.MaxProtectItems))
	}
	sort.SliceStable(q.changes, func(i, j int) bool { return q.changes[i].rel < q.changes[j].rel })
	if q.more > 0 {
		q.changes = append(q.changes, protectChange{".", fmt.Sprintf("and %d more findings not listed", q.more)})
	}
	return q.changes
}

type inoKey struct{ dev, ino uint64 }

// maxProtectChanges bounds the findings kept for the event and stderr;
// past it they are acted on and counted.
const maxProtectChanges = 1000

// quarantine is the end's work in progress.
type quarantine struct {
	ws, suffix string
	changes    []protectChange
	more       int
	spare      protectChange // where a finding not listed is written
}

func (q *quarantine) note(rel, what string) {
	if len(q.changes) >= maxProtectChanges {
		q.more++
		q.spare = protectChange{rel, what}
		return
	}
	q.changes = append(q.changes, protectChange{rel, what})
}

// last is the finding noted last.
func (q *quarantine) last() *protectChange {
	if q.more > 0 {
		return &q.spare
	}
	return &q.changes[len(q.changes)-1]
}

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
func (q *quarantine) restore(rel string, was *fsops.ProtectItem) {
	last := q.last()
	if was.Orig == nil {
		last.what += fmt.Sprintf("; the original was not kept (over %d bytes, or unreadable), nothing put back", fsops.MaxProtectKeep)
		return
	}
	err := fsops.RestoreOriginal(q.ws, rel, *was.Orig)
	if os.IsExist(err) {
		if to, aerr := fsops.QuarantineAside(q.ws, rel, q.suffix); aerr == nil {
			last.what += "; what stood there quarantined as " + to
			err = fsops.RestoreOriginal(q.ws, rel, *was.Orig)
		}
	}
	if err != nil {
		last.what += "; the original could NOT be put back: " + err.Error()
		return
	}
	last.what += "; original restored"
}

func sortedKeys(m map[string]*fsops.ProtectItem) []string {
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
func (r *AgentRun) warnProtect(e *cli.Env) {
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
		r.Agent.Name, r.workspace, len(changes))
	for i, c := range changes {
		if i == maxProtectLines {
			cli.Errorf(e.Stderr, "ctx agent", "%s: protect: and %d more (the agent.stop event lists them)", r.Agent.Name, len(changes)-i)
			break
		}
		cli.Errorf(e.Stderr, "ctx agent", "%s: protect: %s", r.Agent.Name, c)
	}
}

func (r *AgentRun) protectDetail() string {
	if r.protect == nil || len(r.protect.found) == 0 {
		return ""
	}
	return "protect: " + strings.Join(r.protect.found, "; ")
}
