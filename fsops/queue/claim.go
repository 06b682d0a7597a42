package queue

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// listJobs returns the names in pending/ that may be jobs, in claim order
// (byte order of names; generated names sort by publication time). Entries
// the kernel reports as something other than a regular file are dropped
// here; each survivor is checked again with lstat before it is claimed.
func (q *Queue) listJobs() ([]string, error) {
	var names []string
	fd, done := q.relist(dPending)
	defer done()
	err := eachEntry(fd, q.dirPath(dPending), q.buf(), true, func(name []byte, typ uint8) {
		if (typ == unix.DT_REG || typ == unix.DT_UNKNOWN) && len(name) > 0 && name[0] != '.' {
			if s := string(name); ValidJobName(s) == nil {
				names = append(names, s)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// Claim claims one pending job for owner and returns its name and lease.
// When it returns without error the claim move and the lease are both
// durable and the job may be executed; its request is at ClaimedPath.
//
// Jobs are tried oldest name first. For each: a pending entry that is not
// a regular file, or a job whose lease/J is still present (residue that
// check reports), is skipped; mkdir claimed/J decides the race (EEXIST:
// another claimer has it); the winner renames pending/J into claimed/J/
// (ENOENT: the request was taken meanwhile, so the empty claimed/J is
// removed again). It returns ErrEmpty when nothing in a fresh listing of
// pending/ could be claimed.
func (q *Queue) Claim(owner Owner) (string, Lease, error) {
	lease, err := newLease(owner, time.Now(), q.leases)
	if err != nil {
		return "", Lease{}, err
	}
	fresh := false
	for {
		if len(q.candidates) == 0 {
			if fresh {
				return "", Lease{}, ErrEmpty
			}
			if q.candidates, err = q.listJobs(); err != nil {
				return "", Lease{}, err
			}
			fresh = true
			if len(q.candidates) == 0 {
				return "", Lease{}, ErrEmpty
			}
		}
		job := q.candidates[0]
		q.candidates = q.candidates[1:]
		ok, err := q.tryClaim(job, lease, !fresh)
		if err != nil {
			return "", Lease{}, err
		}
		if ok {
			q.logEvent(fsops.Event{Type: "queue.claim", Object: q.object(job), Status: "ok",
				Worker: lease.Worker, PID: lease.PID})
			return job, lease, nil
		}
	}
}

// tryClaim claims job if it can. false without error means someone else
// has it or it is not claimable now. stale says the name comes from an
// earlier listing: it is then checked to still be there, which saves a
// mkdir and rmdir for each job other workers took meanwhile. (A fresh
// listing's file type is rechecked after the rename, which is what makes
// claiming a non-file impossible either way.)
func (q *Queue) tryClaim(job string, lease Lease, stale bool) (bool, error) {
	pfd, cfd := q.fd[dPending], q.fd[dClaimed]
	if stale {
		if st, err := lstatAt(pfd, job); err != nil || !isReg(&st) {
			return false, nil // gone, or not a job (symlink, directory, ...)
		}
	}
	if !q.emptyDir(dLease) {
		if held, err := exists(q.fd[dLease], job); err != nil || held {
			return false, nil
		}
	}
	if err := unix.Mkdirat(cfd, job, jobDirMode&0o777); err != nil {
		if err == unix.EEXIST {
			return false, nil
		}
		return false, pathErr("mkdir", q.path("claimed", job), err)
	}
	step("claim.mkdir")
	cjPath := q.path("claimed", job)
	cj, err := openDirAt(cfd, job)
	if err != nil {
		// Someone replaced our fresh directory: not ours to remove.
		return false, pathErr("open", cjPath, err)
	}
	kept := false
	defer func() {
		if !kept {
			unix.Close(cj)
		}
	}()
	if err := fixMode(cj, jobDirMode, cjPath); err != nil {
		q.dropClaimDir(job)
		return false, err
	}
	if err := q.moveOwned(dClaimed, pfd, job, cj, job); err != nil {
		if rerr := q.dropClaimDir(job); rerr != nil {
			return false, rerr
		}
		if err == unix.ENOENT {
			return false, nil // another claimer moved it first
		}
		return false, pathErr("rename", q.PendingPath(job)+" -> "+q.ClaimedPath(job), err)
	}
	step("claim.renamed")
	// The rename moved whatever was at pending/J a moment after our lstat.
	// If that was swapped for something that is not a regular file, it is
	// not a job: put it back untouched.
	if st, err := lstatAt(cj, job); err != nil || !isReg(&st) {
		if err := q.moveFree(dPending, cj, job, pfd, job); err != nil {
			return false, pathErr("rename", q.ClaimedPath(job)+" -> "+q.PendingPath(job), err)
		}
		if err := q.syncAll(openDir{cj, cjPath}, openDir{pfd, q.dirPath(dPending)}); err != nil {
			return false, err
		}
		return false, q.dropClaimDir(job)
	}
	// Sync the claim move: the request's new and old directories, and
	// claimed/ which gained claimed/J.
	if err := q.syncAll(openDir{cj, cjPath}, openDir{pfd, q.dirPath(dPending)}, openDir{cfd, q.dirPath(dClaimed)}); err != nil {
		return false, err
	}
	step("claim.synced")
	lj, err := q.writeLease(job, lease)
	if err != nil {
		if uerr := q.undoClaim(job, cj, err); uerr != nil {
			return false, uerr
		}
		if errors.Is(err, ErrConflict) {
			return false, nil // lease/J appeared meanwhile: not claimable now
		}
		return false, err
	}
	q.hold(job, heldClaim{cj, lj, lease.Token})
	kept = true
	return true, nil
}

// maxHeld bounds the claims whose directory descriptors a Queue keeps.
const maxHeld = 64

// hold keeps the descriptors of claimed/J and lease/J of a claim this
// Queue made, for its Finish: a worker that claims and finishes in one
// process then reopens nothing, and Finish acts on exactly the
// directories of its own claim. (If the claim was taken away meanwhile —
// recover --force, then another claimer — those directories are gone and
// Finish refuses, instead of finishing someone else's claim of the same
// name.)
func (q *Queue) hold(job string, h heldClaim) {
	if len(q.held) >= maxHeld {
		for j := range q.held {
			q.release(j)
			break
		}
	}
	q.held[job] = h
}

// release closes the held descriptors of job, if any.
func (q *Queue) release(job string) {
	if h, ok := q.held[job]; ok {
		unix.Close(h.cj)
		unix.Close(h.lj)
		delete(q.held, job)
	}
}

// heldClaim is a claim this Queue made: claimed/J and lease/J open, and
// the claim's token.
type heldClaim struct {
	cj, lj int
	token  string
}

// syncAll fsyncs each directory in turn, stopping at the first failure.
func (q *Queue) syncAll(dirs ...openDir) error {
	for _, d := range dirs {
		if err := fsyncFd(d.fd, d.path); err != nil {
			return err
		}
	}
	return nil
}

// openDir is an open directory and its path for messages.
type openDir struct {
	fd   int
	path string
}

// dropClaimDir removes claimed/J if it is empty (rmdir never removes a
// directory holding a request) and fsyncs claimed/.
func (q *Queue) dropClaimDir(job string) error {
	_, err := removeEntry(q.fd[dClaimed], q.dirPath(dClaimed), job, true)
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}

// writeLease creates lease/J/worker: mkdir lease/J, write and fsync a
// sibling temporary, rename it to worker without replacement, fsync
// lease/J/ and lease/. A lease/J that already exists is never touched. It
// returns lease/J open.
func (q *Queue) writeLease(job string, lease Lease) (lj int, err error) {
	lfd := q.fd[dLease]
	ljPath := q.path("lease", job)
	if err := unix.Mkdirat(lfd, job, jobDirMode&0o777); err != nil {
		if err == unix.EEXIST {
			return -1, conflictf("job %s: %s already exists", job, ljPath)
		}
		return -1, pathErr("mkdir", ljPath, err)
	}
	step("lease.mkdir")
	lj, err = openDirAt(lfd, job)
	if err != nil {
		return -1, pathErr("open", ljPath, err)
	}
	defer func() {
		if err != nil {
			unix.Close(lj)
		}
	}()
	if err := fixMode(lj, jobDirMode, ljPath); err != nil {
		return -1, err
	}
	tmp, err := writeTemp(lj, ljPath, "worker", lease.Marshal(), "lease")
	if err != nil {
		return -1, err
	}
	if err := q.installTemp(dLease, lj, tmp, "worker"); err != nil {
		unix.Unlinkat(lj, tmp, 0)
		return -1, pathErr("rename", q.path("lease", job, "worker"), err)
	}
	step("lease.renamed")
	if err := q.syncAll(openDir{lj, ljPath}, openDir{lfd, q.dirPath(dLease)}); err != nil {
		return -1, err
	}
	step("lease.synced")
	return lj, nil
}

// undoClaim puts a claimed request back in pending/ after its lease could
// not be written (cause), so a failed claim leaves the job as it found it.
// Only the lease directory this claim created is removed; a lease/J that
// was there before the claim is evidence and is left alone. It returns nil
// when the job is back in pending/, else an error that includes cause.
func (q *Queue) undoClaim(job string, cj int, cause error) error {
	if !errors.Is(cause, ErrConflict) {
		lj, err := openDirAt(q.fd[dLease], job)
		if err == nil {
			removeTemps(lj, "worker")
			removeEntry(lj, q.path("lease", job), "worker", false)
			unix.Close(lj)
			removeEntry(q.fd[dLease], q.dirPath(dLease), job, true)
		}
	}
	if err := q.moveFree(dPending, cj, job, q.fd[dPending], job); err != nil {
		return fmt.Errorf("%w; and returning the claim failed: %v (run ctx queue check)", cause, pathErr("rename", q.ClaimedPath(job)+" -> "+q.PendingPath(job), err))
	}
	if err := q.syncAll(openDir{cj, q.path("claimed", job)}, openDir{q.fd[dPending], q.dirPath(dPending)}); err != nil {
		return fmt.Errorf("%w; and %v", cause, err)
	}
	if err := q.dropClaimDir(job); err != nil {
		return fmt.Errorf("%w; and %v", cause, err)
	}
	return nil
}

// removeTemps removes the temporaries of target inside dirfd, whoever
// wrote them, and fsyncs the directory if it removed any. Used only where
// the target's writer is known to be done.
func removeTemps(dirfd int, target string) {
	// A fresh descriptor: dirfd may have been listed already, and a FUSE
	// directory handle that was read to its end lists nothing again.
	fresh, err := openDirAt(dirfd, ".")
	if err != nil {
		return
	}
	ents, err := readDir(fresh, "")
	unix.Close(fresh)
	if err != nil {
		return
	}
	removed := false
	for _, e := range ents {
		if t, _, ok := parseTempName(e.Name); ok && t == target {
			removed = unix.Unlinkat(dirfd, e.Name, 0) == nil || removed
		}
	}
	if removed {
		fsyncFd(dirfd, "")
	}
}
