package queue

import (
	"encoding/json"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// checkRequest validates a request body: at most MaxRequest bytes of one
// JSON value (jobs are named *.req.json).
func checkRequest(data []byte) error {
	if len(data) > MaxRequest {
		return fmt.Errorf("%w: request is %d bytes, more than %d", ErrInvalid, len(data), MaxRequest)
	}
	if !json.Valid(data) {
		return fmt.Errorf("%w: request is not valid JSON", ErrInvalid)
	}
	return nil
}

// nameTaken refuses a job name that is already in the queue: an entry
// of any file type at claimed/J, done/J or failed/J (pending/J is refused
// by the rename itself, which never replaces). Every state the protocol
// can leave a job in, complete or incomplete, has one of these; a result
// or lease without any of them exists only where the queue was edited by
// hand, and even then the later finish cannot overwrite it.
func (q *Queue) nameTaken(job string) error {
	checks := []struct {
		dir  int
		name string
	}{{dClaimed, job}, {dDone, job}, {dFailed, job}}
	for _, c := range checks {
		ok, err := exists(q.fd[c.dir], c.name)
		if err != nil {
			return pathErr("stat", q.path(StateDirs[c.dir], c.name), err)
		}
		if ok {
			return conflictf("job %s: %s already exists", job, q.path(StateDirs[c.dir], c.name))
		}
	}
	return nil
}

// Publish makes data the pending job name (a fresh GenerateName when name
// is empty) and returns the job name. The request is written to a sibling
// temporary in pending/, fsynced, renamed to pending/J without replacement
// and pending/ is fsynced, so the job appears whole or not at all.
//
// A name the caller chose is first checked against the rest of the queue
// (nameTaken); a generated name, unique by its time and 32 random bits,
// is not.
func (q *Queue) Publish(name string, data []byte) (string, error) {
	generated := name == ""
	if generated {
		name = GenerateName(time.Now())
	}
	if err := ValidJobName(name); err != nil {
		return "", fmt.Errorf("%w: job: %v", ErrInvalid, err)
	}
	if err := checkRequest(data); err != nil {
		return "", fmt.Errorf("job %s: %w", name, err)
	}
	if !generated {
		if err := q.nameTaken(name); err != nil {
			return "", err
		}
	}
	pfd, pdir := q.fd[dPending], q.dirPath(dPending)
	tmp, err := writeTemp(pfd, pdir, name, data, "publish")
	if err != nil {
		return "", err
	}
	if err := q.installTemp(dPending, pfd, tmp, name); err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		if err == unix.EEXIST {
			return "", conflictf("job %s: %s already exists", name, q.PendingPath(name))
		}
		return "", pathErr("rename", q.PendingPath(name), err)
	}
	step("publish.renamed")
	if err := fsyncFd(pfd, pdir); err != nil {
		return name, err
	}
	step("publish.synced")
	return name, nil
}
