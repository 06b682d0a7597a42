package queue

import (
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Finding is one incomplete job in a check report.
type Finding struct {
	Job      string
	State    State
	Reason   string
	Evidence []string // paths relative to queue/
}

// TempFile is a sibling temporary left in the queue, with the pid that
// wrote it (in the writer's PID namespace).
type TempFile struct {
	Path   string // relative to queue/
	Target string
	PID    int
	Alive  bool // a process with that pid exists here now
}

// Ignored is an entry that is not part of any job: an invalid name, a
// symlink, a FIFO or directory where a file belongs, and so on.
type Ignored struct {
	Path   string // relative to queue/
	Reason string
}

// Report is a snapshot of the whole queue.
type Report struct {
	Jobs     []*Evidence // every job name with evidence, sorted
	States   map[string]State
	Inbox    []string // names in inbox/ that are not temporaries
	Temps    []TempFile
	Ignored  []Ignored
	findings []Finding
}

// Incomplete lists the jobs whose evidence is not one complete state.
func (r *Report) Incomplete() []Finding { return r.findings }

// Scan reads the whole queue, read-only. It is a snapshot: a job that a
// live process is moving at that instant may be seen half-way.
//
// Its steps: each directory's entries (scanDir, scanEntry), then every
// job's state (classify).
func (q *Queue) Scan() (*Report, error) {
	r := &Report{States: map[string]State{}}
	jobs := map[string]*Evidence{}
	for d := dInbox; d < numDirs; d++ {
		if err := q.scanDir(d, r, jobs); err != nil {
			return nil, err
		}
	}
	r.classify(jobs)
	sort.Slice(r.Temps, func(i, j int) bool { return r.Temps[i].Path < r.Temps[j].Path })
	sort.Slice(r.Ignored, func(i, j int) bool { return r.Ignored[i].Path < r.Ignored[j].Path })
	return r, nil
}

// scanDir adds the entries of directory d to r: a temporary to Temps, a
// name in inbox/ to Inbox, any other entry through scanEntry.
func (q *Queue) scanDir(d int, r *Report, jobs map[string]*Evidence) error {
	dirName := StateDirs[d]
	lfd, done := q.relist(d)
	ents, err := readDir(lfd, q.path(dirName))
	done()
	if err != nil {
		return err
	}
	for _, e := range ents {
		rel := dirName + "/" + e.Name
		if target, pid, ok := parseTempName(e.Name); ok {
			r.Temps = append(r.Temps, TempFile{Path: rel, Target: target, PID: pid, Alive: pidExists(pid)})
			continue
		}
		if d == dInbox {
			if !strings.HasPrefix(e.Name, ".") {
				r.Inbox = append(r.Inbox, e.Name)
			}
			continue
		}
		if err := q.scanEntry(d, e.Name, r, jobs); err != nil {
			return err
		}
	}
	return nil
}

// scanEntry records entry name of directory d (not inbox/, not a
// temporary) as evidence of its job in jobs, or as Ignored in r when it is
// not a job's name or not of the type its directory holds.
func (q *Queue) scanEntry(d int, name string, r *Report, jobs map[string]*Evidence) error {
	rel := StateDirs[d] + "/" + name
	st, err := lstatAt(q.fd[d], name)
	if err == unix.ENOENT {
		return nil // moved meanwhile
	}
	if err != nil {
		return pathErr("stat", q.path(rel), err)
	}
	job, isJob := name, ValidJobName(name) == nil
	isResult := false
	if !isJob && (d == dDone || d == dFailed) {
		job, isResult = jobOfResult(name)
	}
	if !isJob && !isResult {
		r.Ignored = append(r.Ignored, Ignored{rel, "not a job name"})
		return nil
	}
	wantDir := d == dClaimed || d == dLease
	switch {
	case wantDir && !isDir(&st):
		r.Ignored = append(r.Ignored, Ignored{rel, "a " + kindOf(&st) + ", not a directory"})
		return nil
	case !wantDir && !isReg(&st):
		r.Ignored = append(r.Ignored, Ignored{rel, "a " + kindOf(&st) + ", not a regular file"})
		return nil
	}
	ev := jobs[job]
	if ev == nil {
		ev = &Evidence{Job: job}
		jobs[job] = ev
	}
	switch d {
	case dPending:
		ev.Pending = true
	case dDone:
		ev.Done, ev.DoneResult = ev.Done || isJob, ev.DoneResult || isResult
	case dFailed:
		ev.Failed, ev.FailedResult = ev.Failed || isJob, ev.FailedResult || isResult
	case dClaimed:
		ev.ClaimDir = true
		return q.inspectClaimDir(ev, r)
	case dLease:
		ev.LeaseDir = true
		return q.inspectLeaseDir(ev, r)
	}
	return nil
}

// classify fills Jobs, States and the findings of r from the evidence of
// every job, in the order of the jobs' names.
func (r *Report) classify(jobs map[string]*Evidence) {
	names := make([]string, 0, len(jobs))
	for j := range jobs {
		names = append(names, j)
	}
	sort.Strings(names)
	for _, j := range names {
		ev := jobs[j]
		r.Jobs = append(r.Jobs, ev)
		st, why := Classify(ev)
		r.States[j] = st
		if !st.Complete() {
			r.findings = append(r.findings, Finding{Job: j, State: st, Reason: why, Evidence: ev.Paths()})
		}
	}
}
