package queue

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Renew is the heartbeat of a claim: it sets the mtime of lease/J/worker
// to now, after checking that the lease still holds the claim named by
// token (a recovered and re-claimed job has another token, and is left
// alone). A holder renews every heartbeat interval; a lease not renewed
// for LeaseExpiry intervals is abandoned (Lease.HolderState).
//
// Renew uses only lookups relative to queue/lease, never the listing
// buffer or the held descriptors, so unlike every other method it may run
// in another goroutine while the Queue's owner works (exec renews while
// its command runs).
func (q *Queue) Renew(job, token string) error {
	if err := ValidJobName(job); err != nil {
		return fmt.Errorf("%w: job: %v", ErrInvalid, err)
	}
	lj, err := openDirAt(q.fd[dLease], job)
	if err != nil {
		if err == unix.ENOENT {
			return conflictf("job %s: no lease/%s any more: the claim was recovered or finished", job, job)
		}
		return pathErr("open", q.path("lease", job), err)
	}
	defer unix.Close(lj)
	l, err := readLease(lj, q.path("lease", job, "worker"))
	if err != nil {
		return fmt.Errorf("%w: job %s: %v", ErrConflict, job, err)
	}
	if token != "" && l.Token != token {
		return conflictf("job %s: the lease holds another claim (token %s, not %s)", job, l.Token, token)
	}
	now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	if err := unix.UtimesNanoAt(lj, "worker", now, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("touch", q.path("lease", job, "worker"), err)
	}
	return nil
}

// Heartbeat renews the claim of job (token) every interval until stop is
// closed, in its own goroutine; lost is told, once, when the claim is no
// longer this one's (Renew's conflict), and renewal stops then.
func (q *Queue) Heartbeat(job, token string, interval time.Duration, stop <-chan struct{}, lost func(error)) {
	if interval <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := q.Renew(job, token); err != nil {
					select {
					case <-stop:
						return // finished meanwhile: nothing is lost
					default:
					}
					if lost != nil {
						lost(err)
					}
					if errors.Is(err, ErrConflict) {
						return
					}
				}
			}
		}
	}()
}

// checkLease checks, when worker is set, that the lease in lj (lease/J)
// names it, and that its claim token is token. The token is read where
// the caller gave it, and for a claim this Queue made on a remote
// filesystem: there a held directory descriptor may name, by path, a
// lease/J that another host's recover and claim made meanwhile. (Locally
// the held descriptors are the claim's own directories, which a recover
// removes, and the open fails instead.)
func (q *Queue) checkLease(job string, lj int, worker, token string, given bool) error {
	if token != "" && !given && !q.fs.Remote {
		token = ""
	}
	if worker == "" && token == "" {
		return nil
	}
	l, err := readLease(lj, q.path("lease", job, "worker"))
	if err != nil {
		return fmt.Errorf("%w: job %s: %v", ErrConflict, job, err)
	}
	if worker != "" && l.Worker != worker {
		return conflictf("job %s is leased to worker %s, not %s", job, l.Worker, worker)
	}
	if token != "" && l.Token != token {
		return conflictf("job %s: the lease holds another claim (token %s, not %s): this claim was recovered and the job claimed again; nothing written", job, l.Token, token)
	}
	return nil
}
