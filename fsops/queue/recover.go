package queue

import (
	"fmt"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// Recovery says what Recover did.
type Recovery struct {
	Job     string
	From    State    // the state Recover found
	To      State    // the state it left the job in
	Actions []string // one line per change, paths relative to queue/
}

// Recover restores job J where the protocol allows it, and refuses
// everything else with ErrConflict (ErrNotFound when J has no evidence),
// changing nothing. It does exactly one of:
//
//   - claimed (claimed/J/J + lease/J/worker, no pending or terminal
//     evidence) whose lease holder is provably gone, or any holder with
//     force: rename claimed/J/J back to pending/J without replacement,
//     fsync both directories, then clean up as finish does;
//   - interrupted-finish (the claim and its lease, plus the result in
//     done/ or failed/): the same holder rule; rename the request beside
//     its result without replacement, fsync, clean up;
//   - residue (the request complete in one state, a claim or lease
//     directory left over): remove lease/J/worker, lease/J and the empty
//     claimed/J, fsyncing each parent.
//
// unleased-claim, conflict and orphan are refused even with force: the
// seed lets a claim return to pending only when claim and lease evidence
// both exist, and never lets evidence be overwritten.
//
// Unless it refuses, Recover also removes J's temporaries whose writing
// process no longer exists (all of them with force); temporaries are never
// evidence. A job with nothing but such temporaries (a publish that died
// before its rename) is "recovered" by removing them.
func (q *Queue) Recover(job string, force bool) (rec Recovery, err error) {
	rec.Job = job
	q.release(job) // a claim this Queue held is being judged from disk now
	ev, err := q.Inspect(job)
	if err != nil {
		return rec, err
	}
	state, why := Classify(ev)
	rec.From, rec.To = state, state
	if ev, state, why, err = q.halfMoved(ev, state, why, force, &rec); err != nil {
		return rec, err
	}
	defer func() { q.logRecover(&rec, ev, err) }()
	switch state {
	case StateClaimed, StateInterruptedFinish:
		if err := holderGone(ev, force); err != nil {
			return rec, err
		}
		to, tfd := StatePending, q.fd[dPending]
		switch {
		case ev.DoneResult:
			to, tfd = StateDone, q.fd[dDone]
		case ev.FailedResult:
			to, tfd = StateFailed, q.fd[dFailed]
		}
		if err := q.moveBack(job, to, tfd); err != nil {
			return rec, err
		}
		rec.To = to
		rec.Actions = append(rec.Actions, "moved claimed/"+job+"/"+job+" -> "+string(to)+"/"+job)
		fallthrough
	case StateResidue:
		if err := q.cleanup(job, "recover"); err != nil {
			return rec, err
		}
		if ev.Lease {
			rec.Actions = append(rec.Actions, "removed lease/"+job+"/worker")
		}
		if ev.LeaseDir {
			rec.Actions = append(rec.Actions, "removed lease/"+job+"/")
		}
		if ev.ClaimDir {
			rec.Actions = append(rec.Actions, "removed claimed/"+job+"/")
		}
		if state == StateResidue {
			after, err := q.Inspect(job)
			if err != nil {
				return rec, err
			}
			rec.To, _ = Classify(after)
		}
	case StateUnleasedClaim:
		return rec, conflictf("job %s: %s; recover needs both claim and lease evidence, so if no worker runs it, "+
			"reconcile by hand (ctx man ctx.shared, \"Reconciling an unleased claim\")", job, why)
	case StateConflict, StateOrphan:
		return rec, conflictf("job %s: %s: %s; reconcile by hand (see ctx man ctx.shared)", job, state, why)
	}
	removed, err := q.removeStaleTemps(job, force)
	rec.Actions = append(rec.Actions, removed...)
	if err != nil {
		return rec, err
	}
	if len(rec.Actions) == 0 {
		if state == StateAbsent {
			return rec, fmt.Errorf("%w: %s", ErrNotFound, job)
		}
		return rec, conflictf("job %s is %s: nothing to recover", job, state)
	}
	return rec, nil
}

// holderGone allows recovering a claim only when its lease proves the
// holder gone, or with force.
func holderGone(ev *Evidence, force bool) error {
	if force {
		return nil
	}
	if ev.LeaseData == nil {
		return conflictf("job %s: the lease cannot be read (%v), so its holder cannot be proven gone; use --force if no worker runs it", ev.Job, ev.LeaseErr)
	}
	h, why := ev.LeaseData.HolderState()
	if h == HolderGone {
		return nil
	}
	return conflictf("job %s: holder %s: %s; use --force if it no longer runs the job", ev.Job, h, why)
}

// moveBack renames claimed/J/J to the directory tfd (pending/, or the
// terminal directory holding J's result) without replacement and fsyncs
// both directories.
func (q *Queue) moveBack(job string, to State, tfd int) error {
	cj, err := openDirAt(q.fd[dClaimed], job)
	if err != nil {
		return pathErr("open", q.path("claimed", job), err)
	}
	defer unix.Close(cj)
	dst := q.path(string(to), job)
	move := q.moveOwned // beside its result, whose link decided the finish
	d := dDone
	switch to {
	case StatePending:
		move, d = q.moveFree, dPending // publish and ingest race for pending/J
	case StateFailed:
		d = dFailed
	}
	if err := move(d, cj, job, tfd, job); err != nil {
		if err == unix.EEXIST {
			return conflictf("job %s: %s already exists", job, dst)
		}
		return pathErr("rename", q.ClaimedPath(job)+" -> "+dst, err)
	}
	step("recover.renamed")
	if err := q.syncAll(openDir{cj, q.path("claimed", job)}, openDir{tfd, q.path(string(to))}); err != nil {
		return err
	}
	step("recover.synced")
	return nil
}

// removeStaleTemps removes the temporaries of job — .J.tmp-* in pending/,
// .J.result.tmp-* in done/ and failed/ — whose writer pid no longer
// exists (all of them with force). Removing a temporary never loses
// evidence: a writer that is in fact alive fails its rename and reports it.
func (q *Queue) removeStaleTemps(job string, force bool) ([]string, error) {
	var removed []string
	for _, c := range []struct {
		d      int
		target string
	}{{dPending, job}, {dDone, resultName(job)}, {dFailed, resultName(job)}} {
		lfd, done := q.relist(c.d)
		ents, err := readDir(lfd, q.path(StateDirs[c.d]))
		done()
		if err != nil {
			return removed, err
		}
		for _, e := range ents {
			target, pid, ok := parseTempName(e.Name)
			if !ok || target != c.target || (!force && pidExists(pid)) {
				continue
			}
			did, err := removeEntry(q.fd[c.d], q.path(StateDirs[c.d]), e.Name, false)
			if err != nil {
				return removed, err
			}
			if did {
				removed = append(removed, "removed "+StateDirs[c.d]+"/"+e.Name)
			}
		}
	}
	return removed, nil
}

// halfMoved completes, before Recover decides, a move to pending/ that
// stopped between its link and unlink (finishHalfMove), and returns the
// evidence as it then is.
func (q *Queue) halfMoved(ev *Evidence, state State, why string, force bool, rec *Recovery) (*Evidence, State, string, error) {
	if state != StateConflict || !ev.Pending || !ev.Claimed || ev.Done || ev.Failed || (ev.Lease && holderGone(ev, force) != nil) {
		return ev, state, why, nil
	}
	done, err := q.finishHalfMove(ev.Job)
	if err != nil || !done {
		return ev, state, why, err
	}
	rec.Actions = append(rec.Actions, "removed claimed/"+ev.Job+"/"+ev.Job+" (a move to pending/ had linked it there)")
	after, err := q.Inspect(ev.Job)
	if err != nil {
		return ev, state, why, err
	}
	state, why = Classify(after)
	return after, state, why, nil
}

// finishHalfMove completes a move back to pending/ (recover, or a claim
// undone) that stopped between its link and its unlink on a filesystem
// without RENAME_NOREPLACE: pending/J and claimed/J/J are one file
// (sameFile), so the claimed name goes. Only moves into pending/ link; a
// claim renames, so no other move leaves this pair.
func (q *Queue) finishHalfMove(job string) (bool, error) {
	cj, err := openDirAt(q.fd[dClaimed], job)
	if err != nil {
		return false, nil
	}
	defer unix.Close(cj)
	if !q.sameFile(q.fd[dPending], job, cj, job) {
		return false, nil
	}
	if _, err := removeEntry(cj, q.path("claimed", job), job, false); err != nil {
		return false, err
	}
	return true, nil
}

// logRecover appends Recover's event: what it did, or why it failed.
func (q *Queue) logRecover(rec *Recovery, ev *Evidence, err error) {
	if len(rec.Actions) == 0 && err == nil {
		return
	}
	e := fsops.Event{Type: "queue.recover", Object: q.object(rec.Job), Status: string(rec.To),
		Detail: "from " + string(rec.From)}
	if ev != nil && ev.LeaseData != nil {
		e.Worker = ev.LeaseData.Worker
	}
	if err != nil {
		e.Status, e.Errno, e.Detail = "error", errnoName(err), err.Error()
	}
	q.logEvent(e)
}
