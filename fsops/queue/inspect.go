package queue

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// State is what the evidence on disk says about one job name.
type State string

// The four complete states of the seed, and absence.
const (
	StateAbsent  State = "absent"  // no evidence at all
	StatePending State = "pending" // pending/J
	StateClaimed State = "claimed" // claimed/J/J + lease/J/worker
	StateDone    State = "done"    // done/J + done/J.result
	StateFailed  State = "failed"  // failed/J + failed/J.result
)

// The incomplete states: every other combination of evidence. check
// reports them; recover handles the first two.
const (
	// StateResidue: the request is in one complete state, and a claim
	// directory (empty) or lease of an earlier claim is left over — a
	// finish, recover or claim stopped during its cleanup. recover
	// removes the leftovers.
	StateResidue State = "residue"
	// StateInterruptedFinish: claimed/J/J and its lease, and the result
	// already in done/ or failed/ — a finish stopped between its two
	// renames. recover completes it (the request joins its result).
	StateInterruptedFinish State = "interrupted-finish"
	// StateUnleasedClaim: claimed/J/J without lease/J/worker — a claim
	// stopped between the claim move and the lease. The job never ran
	// (execution starts only after the lease is durable), but the seed
	// allows recover only with both claim and lease evidence, so this
	// needs explicit reconciliation by an operator.
	StateUnleasedClaim State = "unleased-claim"
	// StateConflict: evidence that no sequence of protocol steps
	// produces (a request in two states, a result beside the wrong
	// request, a request without its result, foreign entries in a job
	// directory). Explicit reconciliation only.
	StateConflict State = "conflict"
	// StateOrphan: a result, claim directory or lease with no request
	// anywhere. Explicit reconciliation only.
	StateOrphan State = "orphan"
)

// Complete reports whether s is one of the seed's durable states (or
// absence), as opposed to an incomplete pair.
func (s State) Complete() bool {
	switch s {
	case StateAbsent, StatePending, StateClaimed, StateDone, StateFailed:
		return true
	}
	return false
}

// Evidence is every entry on disk that belongs to one job name. Only
// regular files count as requests, results and leases, and only real
// directories as claim and lease directories; anything else at those
// names (a symlink, a FIFO) is not evidence and is listed as ignored.
type Evidence struct {
	Job          string
	Pending      bool // pending/J
	ClaimDir     bool // claimed/J
	Claimed      bool // claimed/J/J
	LeaseDir     bool // lease/J
	Lease        bool // lease/J/worker
	Done         bool // done/J
	DoneResult   bool // done/J.result
	Failed       bool // failed/J
	FailedResult bool // failed/J.result
	// Foreign lists the entries in claimed/J or lease/J other than J,
	// worker and lease temporaries, as paths relative to queue/: they
	// would make rmdir fail, and a refusal names them.
	Foreign []string
	// LeaseData is the parsed lease when Lease is set and it parses;
	// otherwise LeaseErr says why not.
	LeaseData *Lease
	LeaseErr  error
}

// Paths lists the evidence as paths relative to queue/.
func (ev *Evidence) Paths() []string {
	j := ev.Job
	var out []string
	add := func(ok bool, p string) {
		if ok {
			out = append(out, p)
		}
	}
	add(ev.Pending, "pending/"+j)
	add(ev.ClaimDir && !ev.Claimed, "claimed/"+j+"/")
	add(ev.Claimed, "claimed/"+j+"/"+j)
	add(ev.LeaseDir && !ev.Lease, "lease/"+j+"/")
	add(ev.Lease, "lease/"+j+"/worker")
	add(ev.Done, "done/"+j)
	add(ev.DoneResult, "done/"+resultName(j))
	add(ev.Failed, "failed/"+j)
	add(ev.FailedResult, "failed/"+resultName(j))
	return append(out, ev.Foreign...)
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// Classify names the state of the evidence and, for incomplete states,
// why. It is pure: the same evidence always gives the same answer.
func Classify(ev *Evidence) (State, string) {
	reqs := count(ev.Pending, ev.Claimed, ev.Done, ev.Failed)
	results := count(ev.DoneResult, ev.FailedResult)
	leftover := (ev.ClaimDir && !ev.Claimed) || ev.LeaseDir
	switch {
	case reqs == 0 && results == 0 && !ev.ClaimDir && !ev.LeaseDir:
		return StateAbsent, ""
	case reqs > 1:
		return StateConflict, fmt.Sprintf("the request is in %d states at once", reqs)
	case results > 1:
		return StateConflict, "results in both done/ and failed/"
	case len(ev.Foreign) > 0:
		return StateConflict, "a claim or lease directory holds foreign entries"
	case reqs == 0 && results > 0:
		return StateOrphan, "a result without its request"
	case reqs == 0:
		return StateOrphan, "a claim or lease directory without a request"
	case ev.Pending && results > 0:
		return StateConflict, "a pending request with a result"
	case ev.Pending && leftover:
		return StateResidue, "pending, with a claim or lease directory left over"
	case ev.Pending:
		return StatePending, ""
	case ev.Claimed && !ev.Lease && results > 0:
		return StateConflict, "a claimed request with a result but no lease"
	case ev.Claimed && !ev.Lease:
		return StateUnleasedClaim, "claimed without a lease (stopped between claim and lease)"
	case ev.Claimed && results > 0:
		return StateInterruptedFinish, "result written, request not yet moved beside it"
	case ev.Claimed:
		return StateClaimed, ""
	case ev.Done && !ev.DoneResult:
		return StateConflict, "done/" + ev.Job + " without done/" + resultName(ev.Job)
	case ev.Failed && !ev.FailedResult:
		return StateConflict, "failed/" + ev.Job + " without failed/" + resultName(ev.Job)
	case leftover:
		return StateResidue, "finished, with a claim or lease directory left over"
	case ev.Done:
		return StateDone, ""
	}
	return StateFailed, ""
}

// inspectClaimDir fills Claimed and Foreign from the entries of claimed/J.
// r, when not nil, collects what is ignored there.
func (q *Queue) inspectClaimDir(ev *Evidence, r *Report) error {
	j := ev.Job
	cj, err := openDirAt(q.fd[dClaimed], j)
	if err != nil {
		if err == unix.ENOENT {
			ev.ClaimDir = false
			return nil
		}
		return pathErr("open", q.path("claimed", j), err)
	}
	defer unix.Close(cj)
	ents, err := readDir(cj, q.path("claimed", j))
	if err != nil {
		return err
	}
	for _, e := range ents {
		rel := "claimed/" + j + "/" + e.Name
		if q.fusePlaceholder(e.Name) {
			ignorePlaceholder(r, rel)
			continue
		}
		st, err := lstatAt(cj, e.Name)
		if err != nil {
			continue
		}
		if e.Name == j && isReg(&st) {
			ev.Claimed = true
			continue
		}
		ev.Foreign = append(ev.Foreign, rel)
		if r != nil {
			reason := "not part of a claim"
			if e.Name == j {
				reason = "a " + kindOf(&st) + ", not a regular file"
			}
			r.Ignored = append(r.Ignored, Ignored{rel, reason})
		}
	}
	return nil
}

// inspectLeaseDir fills Lease, LeaseData/LeaseErr and Foreign from lease/J.
func (q *Queue) inspectLeaseDir(ev *Evidence, r *Report) error {
	j := ev.Job
	lj, err := openDirAt(q.fd[dLease], j)
	if err != nil {
		if err == unix.ENOENT {
			ev.LeaseDir = false
			return nil
		}
		return pathErr("open", q.path("lease", j), err)
	}
	defer unix.Close(lj)
	ents, err := readDir(lj, q.path("lease", j))
	if err != nil {
		return err
	}
	for _, e := range ents {
		rel := "lease/" + j + "/" + e.Name
		if target, pid, ok := parseTempName(e.Name); ok && target == "worker" {
			if r != nil {
				r.Temps = append(r.Temps, TempFile{Path: rel, Target: target, PID: pid, Alive: pidExists(pid)})
			}
			continue
		}
		if q.fusePlaceholder(e.Name) {
			ignorePlaceholder(r, rel)
			continue
		}
		st, err := lstatAt(lj, e.Name)
		if err != nil {
			continue
		}
		if e.Name == "worker" && isReg(&st) {
			ev.Lease = true
			l, err := readLease(lj, q.path("lease", j, "worker"))
			if err != nil {
				ev.LeaseErr = err
			} else {
				ev.LeaseData = &l
			}
			continue
		}
		ev.Foreign = append(ev.Foreign, rel)
		if r != nil {
			reason := "not part of a lease"
			if e.Name == "worker" {
				reason = "a " + kindOf(&st) + ", not a regular file"
			}
			r.Ignored = append(r.Ignored, Ignored{rel, reason})
		}
	}
	return nil
}

// ignorePlaceholder lists a FUSE placeholder (fuse.go) as ignored: not
// evidence, gone once the file it stands for is closed.
func ignorePlaceholder(r *Report, rel string) {
	if r != nil {
		r.Ignored = append(r.Ignored, Ignored{rel, "a FUSE placeholder of a file removed while open; it goes when that file is closed"})
	}
}

// readLease reads and parses lease/J/worker through the lease/J
// descriptor, without following a symlink.
// Renewed is the file's mtime: the claim, or the last heartbeat.
func readLease(lj int, path string) (Lease, error) {
	b, st, err := readFileStatAt(lj, "worker", path, MaxLease)
	if err != nil {
		return Lease{}, err
	}
	l, err := ParseLease(b)
	l.Renewed = time.Unix(st.Mtim.Unix())
	return l, err
}

// readFileAt reads at most limit bytes of the regular file name inside
// dirfd; a symlink, a non-regular file or a larger file is an error.
func readFileAt(dirfd int, name, path string, limit int64) ([]byte, error) {
	b, _, err := readFileStatAt(dirfd, name, path, limit)
	return b, err
}

// readFileStatAt is readFileAt that also returns the file's stat.
func readFileStatAt(dirfd int, name, path string, limit int64) (b []byte, st unix.Stat_t, err error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, pathErr("open", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, st, pathErr("stat", path, err)
	}
	if !isReg(&st) {
		return nil, st, pathErr("open", path, fmt.Errorf("is a %s, not a regular file", kindOf(&st)))
	}
	b, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, st, pathErr("read", path, err)
	}
	if int64(len(b)) > limit {
		return nil, st, pathErr("read", path, fmt.Errorf("larger than %d bytes", limit))
	}
	return b, st, nil
}

// Inspect gathers the evidence for one job without scanning the queue.
func (q *Queue) Inspect(job string) (*Evidence, error) {
	if err := ValidJobName(job); err != nil {
		return nil, fmt.Errorf("%w: job: %v", ErrInvalid, err)
	}
	ev := &Evidence{Job: job}
	regular := func(d int, name string) (bool, error) {
		st, err := lstatAt(q.fd[d], name)
		if err == unix.ENOENT {
			return false, nil
		}
		if err != nil {
			return false, pathErr("stat", q.path(StateDirs[d], name), err)
		}
		return isReg(&st), nil
	}
	var err error
	for _, c := range []struct {
		dst  *bool
		d    int
		name string
	}{
		{&ev.Pending, dPending, job},
		{&ev.Done, dDone, job}, {&ev.DoneResult, dDone, resultName(job)},
		{&ev.Failed, dFailed, job}, {&ev.FailedResult, dFailed, resultName(job)},
	} {
		if *c.dst, err = regular(c.d, c.name); err != nil {
			return nil, err
		}
	}
	ev.ClaimDir, ev.LeaseDir = true, true
	if err := q.inspectClaimDir(ev, nil); err != nil {
		if !isNotDir(err) {
			return nil, err
		}
		ev.ClaimDir = false
	}
	if err := q.inspectLeaseDir(ev, nil); err != nil {
		if !isNotDir(err) {
			return nil, err
		}
		ev.LeaseDir = false
	}
	return ev, nil
}

// isNotDir reports an open failure meaning "no directory here" (a
// symlink or a file stands at the name): such an entry is not evidence.
func isNotDir(err error) bool {
	return errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// pidExists reports whether a process with this pid exists here.
func pidExists(pid int) bool {
	return unix.Kill(pid, 0) != unix.ESRCH
}
