package queue

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// FinishOptions are optional checks and facts for Finish.
type FinishOptions struct {
	// Worker, when set, must be the worker named in the job's lease.
	Worker string
	// Exit is recorded in the queue.finish event (exec sets it).
	Exit *int
	// Token, when set, must be the claim token in the job's lease (what
	// Claim returned): the caller finishes only the claim it holds. A
	// claim this Queue made is checked against its own token anyway.
	Token string
}

// Finish ends claimed job with status st and the result bytes. The result
// is written to a sibling temporary in done/ (or failed/), fsynced and
// renamed to J.result without replacement, the directory fsynced; then
// the request is renamed from claimed/J/J beside it without replacement,
// both directories fsynced; then lease/J/worker, lease/J and claimed/J are
// removed, each parent fsynced. It returns the terminal request path.
//
// The job must be claimed with its lease present. Nothing is overwritten:
// an existing result or terminal request makes Finish fail with
// ErrConflict, leaving the claim as it was (or, if the result was already
// placed, in the state interrupted-finish that recover completes).
//
// Its steps: the arguments (checkFinishArgs), the claim and its evidence
// (openClaim), the lease's worker (checkLeaseWorker), the state, then the
// protocol's writes in order: placeResult, moveRequest, cleanupAt.
func (q *Queue) Finish(job string, st Status, result []byte, opt FinishOptions) (path string, err error) {
	if err := checkFinishArgs(job, st, result); err != nil {
		return "", err
	}
	defer func() {
		ev := fsops.Event{Type: "queue.finish", Object: q.object(job), Status: string(st), Worker: opt.Worker, Exit: opt.Exit}
		if err != nil {
			ev.Status, ev.Errno, ev.Detail = "error", errnoName(err), err.Error()
		}
		q.logEvent(ev)
	}()
	token := opt.Token
	if h, ok := q.held[job]; ok && token == "" {
		token = h.token
	}
	cj, lj, ev, blocked, err := q.openClaim(job, st)
	if err != nil {
		return "", err
	}
	defer q.release(job)
	if err := q.checkLease(job, lj, opt.Worker, token, opt.Token != ""); err != nil {
		return "", err
	}
	// Every conflict is checked before anything is written: a finish that
	// wrote its result and then met a foreign request (or a result from an
	// earlier, interrupted finish) would itself leave the job incomplete.
	// Only the complete claimed state may be finished. openClaim
	// gathered the evidence (claimEvidence), all but the result in st's
	// directory: the no-replace rename of the result (placeResult) is that
	// check.
	//
	// A symlink, FIFO or directory at a name finish must create is no
	// evidence (Classify passes over it) but still blocks the rename.
	if state, _ := Classify(ev); state != StateClaimed || blocked.name != "" {
		return "", q.refuseFinishAt(job, st, ev, blocked)
	}
	// What remains is a race with another process between that check and
	// the no-replace renames; the renames refuse it, and the message
	// names the step that takes the job on from where it then stands.
	if err := q.placeResult(job, st, result, ev, blocked); err != nil {
		return "", err
	}
	if err := q.moveRequest(job, st, cj); err != nil {
		return "", err
	}
	if err := q.cleanupAt(job, lj, "finish"); err != nil {
		return "", err
	}
	return q.TerminalPath(st, job), nil
}

// checkFinishArgs checks Finish's arguments before anything is opened.
func checkFinishArgs(job string, st Status, result []byte) error {
	if _, err := ParseStatus(string(st)); err != nil {
		return err
	}
	if err := ValidJobName(job); err != nil {
		return fmt.Errorf("%w: job: %v", ErrInvalid, err)
	}
	if len(result) > MaxResult {
		return fmt.Errorf("%w: job %s: result is %d bytes, more than %d", ErrInvalid, job, len(result), MaxResult)
	}
	return nil
}

// placeResult is Finish's first write: the result to a temporary in st's
// directory, renamed to J.result without replacement, the directory
// fsynced. ev and blocked are the evidence Finish decided on, for the
// refusal when something is at J.result.
func (q *Queue) placeResult(job string, st Status, result []byte, ev *Evidence, blocked blocker) error {
	tfd, tdir := q.fd[st.dir()], q.dirPath(st.dir())
	tmp, err := writeTemp(tfd, tdir, resultName(job), result, "finish")
	if err != nil {
		return err
	}
	if err := q.installTemp(st.dir(), tfd, tmp, resultName(job)); err != nil {
		unix.Unlinkat(tfd, tmp, 0)
		if err == unix.EEXIST {
			// Something is at J.result: the result of an earlier
			// finish (interrupted, or complete), or a blocker. Nothing
			// was written (the temporary is gone), so the refusal is
			// the one a lookup before the write would have given.
			if rerr := q.refuseFinishAt(job, st, ev, blocked); rerr != nil {
				return rerr
			}
			return conflictf("job %s: %s appeared meanwhile; nothing written; %s", job, q.ResultPath(st, job), q.nextStepNow(job))
		}
		return pathErr("rename", q.ResultPath(st, job), err)
	}
	step("finish.result-renamed")
	if err := fsyncFd(tfd, tdir); err != nil {
		return err
	}
	step("finish.result-synced")
	return nil
}

// moveRequest is Finish's second write: the request from claimed/J (cj)
// to st's directory without replacement, both directories fsynced.
func (q *Queue) moveRequest(job string, st Status, cj int) error {
	tfd, tdir := q.fd[st.dir()], q.dirPath(st.dir())
	if err := q.moveOwned(st.dir(), cj, job, tfd, job); err != nil {
		if err == unix.EEXIST {
			err = conflictf("%s appeared meanwhile", q.TerminalPath(st, job))
		} else {
			err = pathErr("rename", q.ClaimedPath(job)+" -> "+q.TerminalPath(st, job), err)
		}
		return fmt.Errorf("job %s: result written but request not moved; %s: %w", job, q.nextStepNow(job), err)
	}
	step("finish.request-renamed")
	if err := q.syncAll(openDir{cj, q.path("claimed", job)}, openDir{tfd, tdir}); err != nil {
		return err
	}
	step("finish.request-synced")
	return nil
}

// refuseFinishAt completes the evidence of claimEvidence with the one
// entry it leaves out, J.result in st's directory, and returns Finish's
// refusal: the job's state when it is not claimed, else the first blocker
// of J.result and J in st's directory. It returns nil when the completed
// evidence is the claimed state with nothing in the way (the result
// appeared and went again meanwhile).
func (q *Queue) refuseFinishAt(job string, st Status, ev *Evidence, blocked blocker) error {
	res := resultName(job)
	sta, err := lstatAt(q.fd[st.dir()], res)
	switch {
	case err == nil && isReg(&sta):
		if st == Done {
			ev.DoneResult = true
		} else {
			ev.FailedResult = true
		}
	case err == nil:
		blocked = blocker{res, kindOf(&sta)} // J.result comes before J
	case err != unix.ENOENT:
		return pathErr("stat", q.ResultPath(st, job), err)
	}
	if state, _ := Classify(ev); state != StateClaimed {
		return q.refuseFinish(job, ev)
	}
	if blocked.name != "" {
		return q.blockedFinish(job, q.dirPath(st.dir()), blocked)
	}
	return nil
}

// refuseFinish is Finish's refusal of a job whose evidence (ev) is not
// the claimed state. It describes the job as Inspect sees it, the lease's
// content included (recover's advice depends on it).
func (q *Queue) refuseFinish(job string, ev *Evidence) error {
	state, why := Classify(ev)
	if full, err := q.Inspect(job); err == nil {
		if s, w := Classify(full); s != StateClaimed {
			ev, state, why = full, s, w
		}
	}
	return conflictf("job %s is %s (%s: %s); nothing written; %s",
		job, state, why, strings.Join(ev.Paths(), " "), q.nextStep(ev, state))
}

// blockedFinish is Finish's refusal of a name it must create that is
// taken by something that is not evidence.
func (q *Queue) blockedFinish(job, tdir string, b blocker) error {
	return conflictf("job %s: %s already exists and is a %s, not queue evidence; nothing written; remove it by hand (%s lists it)",
		job, filepath.Join(tdir, b.name), b.kind, q.command("check"))
}

// blocker is an entry at a name Finish must create that is not evidence.
type blocker struct{ name, kind string }

// claimEvidence is Inspect for Finish: the evidence Classify needs about
// job, whose claim is open as cj (claimed/J) and lj (lease/J), which are
// listed from their current offset: the descriptors of a claim are
// listed once, by its Finish, and never read before (a second listing
// would find nothing, and the finish would be refused). It looks at the
// entries Inspect looks at, through the descriptors this finish acts on:
// one lstat each for pending/J, done/J, failed/J and the J.result of the
// other terminal status, and one listing each of claimed/J and lease/J
// (the kernel's entry types, lstat only where the filesystem reports
// none). It leaves out the lease's content, which Classify does not look
// at, and J.result in st's directory: Finish renames its result there
// without replacement before it changes anything else, so that rename's
// EEXIST is this lookup, made atomically, and only then does Finish look
// (refuseFinishAt). The protocol stays as safe: whatever is at J.result,
// the rename fails, its temporary is removed, and the job is exactly as
// it was, with the refusal a lookup would have given. (A negative lookup
// costs a dentry allocation on tmpfs, which keeps no negative dentries:
// there a directory read as empty by emptyDir has none of the names
// looked up, and is not looked in.)
// blocked is J in st's directory when it exists but is not a regular
// file: no evidence, yet it would block the rename.
func (q *Queue) claimEvidence(job string, cj, lj int, st Status) (ev *Evidence, blocked blocker, err error) {
	ev = &Evidence{Job: job, ClaimDir: true, LeaseDir: true}
	res := resultName(job)
	// In each terminal directory the result comes first, as finish
	// creates them.
	checks := [5]struct {
		dst  *bool
		d    int
		name string
	}{{&ev.Pending, dPending, job},
		{&ev.DoneResult, dDone, res}, {&ev.Done, dDone, job},
		{&ev.FailedResult, dFailed, res}, {&ev.Failed, dFailed, job}}
	empty := emptyDirs{q: q}
	for _, c := range checks {
		if c.d == st.dir() && c.name == res {
			continue // the result's rename checks it (see above)
		}
		if empty.empty(c.d) {
			continue // nothing there (emptyDir)
		}
		sta, err := lstatAt(q.fd[c.d], c.name)
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			return nil, blocker{}, pathErr("stat", q.path(StateDirs[c.d], c.name), err)
		}
		*c.dst = isReg(&sta)
		if !*c.dst && c.d == st.dir() && blocked.name == "" {
			blocked = blocker{c.name, kindOf(&sta)}
		}
	}
	if err := q.listClaim(ev, job, cj, lj); err != nil {
		return nil, blocker{}, err
	}
	return ev, blocked, nil
}

// listClaim fills ev's Claimed, Lease and Foreign from one listing each of
// claimed/J (cj) and lease/J (lj): the kernel's entry types, lstat only
// where the filesystem reports none.
func (q *Queue) listClaim(ev *Evidence, job string, cj, lj int) error {
	entryType := func(dirfd int, name []byte, typ uint8) (uint32, bool) {
		switch typ {
		case unix.DT_REG:
			return unix.S_IFREG, true
		case unix.DT_UNKNOWN:
			sta, err := lstatAt(dirfd, string(name))
			if err != nil {
				return 0, false // gone meanwhile: as Inspect, not counted
			}
			return sta.Mode & unix.S_IFMT, true
		}
		return unix.S_IFDIR, true // any type but a regular file
	}
	// A directory removed meanwhile lists as ENOENT: it holds nothing.
	gone := func(err error) bool { return errors.Is(err, unix.ENOENT) }
	err := eachEntry(cj, q.path("claimed", job), q.buf(), false, func(name []byte, typ uint8) {
		if q.fusePlaceholder(string(name)) {
			return // not evidence; it goes by itself (fuse.go)
		}
		if t, ok := entryType(cj, name, typ); ok {
			if t == unix.S_IFREG && string(name) == job {
				ev.Claimed = true
			} else {
				ev.Foreign = append(ev.Foreign, "claimed/"+job+"/"+string(name))
			}
		}
	})
	if err != nil && !gone(err) {
		return err
	}
	err = eachEntry(lj, q.path("lease", job), q.buf(), false, func(name []byte, typ uint8) {
		if len(name) > 0 && name[0] == '.' {
			if target, _, ok := parseTempName(string(name)); ok && target == "worker" {
				return // a lease temporary: not evidence, not in the way
			}
			if q.fusePlaceholder(string(name)) {
				return // not evidence; it goes by itself (fuse.go)
			}
		}
		if t, ok := entryType(lj, name, typ); ok {
			if t == unix.S_IFREG && string(name) == "worker" {
				ev.Lease = true
			} else {
				ev.Foreign = append(ev.Foreign, "lease/"+job+"/"+string(name))
			}
		}
	})
	if err != nil && !gone(err) {
		return err
	}
	return nil
}

// openClaim returns claimed/J and lease/J of a claimed job, open and held
// until release: the ones this Queue's own Claim kept, else opened now,
// with the evidence about the job that Finish decides on (claimEvidence,
// for terminal status st). It checks that claimed/J/J and lease/J/worker
// are regular files; when they are not, the error names the job's actual
// state.
func (q *Queue) openClaim(job string, st Status) (cj, lj int, ev *Evidence, blocked blocker, err error) {
	h, ok := q.held[job]
	wasHeld := ok
	if !ok {
		if h.cj, err = openDirAt(q.fd[dClaimed], job); err == nil {
			if h.lj, err = openDirAt(q.fd[dLease], job); err != nil {
				unix.Close(h.cj)
			}
		}
		if err == nil {
			q.held[job], ok = h, true
		}
	}
	if ok {
		ev, blocked, err = q.claimEvidence(job, h.cj, h.lj, st)
		if err != nil {
			q.release(job)
			return -1, -1, nil, blocker{}, err
		}
		if ev.Claimed && ev.Lease {
			return h.cj, h.lj, ev, blocked, nil
		}
		q.release(job)
	}
	ev, ierr := q.Inspect(job)
	if ierr != nil {
		return -1, -1, nil, blocker{}, ierr
	}
	state, why := Classify(ev)
	if wasHeld {
		return -1, -1, nil, blocker{}, conflictf("job %s: the claim this process made no longer exists (recovered meanwhile); the job is now %s", job, state)
	}
	switch state {
	case StateAbsent:
		return -1, -1, nil, blocker{}, fmt.Errorf("%w: %s", ErrNotFound, job)
	case StateInterruptedFinish:
		return -1, -1, nil, blocker{}, conflictf("job %s: an earlier finish was interrupted (%s); %s", job, why, q.nextStep(ev, state))
	}
	msg := fmt.Sprintf("job %s is not claimed with a lease: it is %s", job, state)
	if why != "" {
		msg += " (" + why + ")"
	}
	return -1, -1, nil, blocker{}, conflictf("%s", msg)
}

// cleanup removes what a claim leaves once its request has moved on:
// lease/J/worker (and lease temporaries), lease/J, then claimed/J, each
// removal followed by an fsync of its parent. Entries already gone are
// fine, so a cleanup that was interrupted can simply run again; a
// directory that still holds something is not removed and is an error.
func (q *Queue) cleanup(job, prefix string) error {
	lj, err := openDirAt(q.fd[dLease], job)
	switch {
	case err == nil:
		defer unix.Close(lj)
	case err != unix.ENOENT:
		return pathErr("open", q.path("lease", job), err)
	}
	return q.cleanupAt(job, lj, prefix)
}

// cleanupAt is cleanup with lease/J already open as lj (-1: no lease/J).
func (q *Queue) cleanupAt(job string, lj int, prefix string) error {
	if lj >= 0 {
		if _, err := removeEntry(lj, q.path("lease", job), "worker", false); err != nil {
			return err
		}
	}
	step(prefix + ".lease-removed")
	_, err := removeEntry(q.fd[dLease], q.dirPath(dLease), job, true)
	if errors.Is(err, unix.ENOTEMPTY) && lj >= 0 {
		// A lease temporary left by a claim that stopped between its
		// link and unlink (filesystems without RENAME_NOREPLACE), or
		// by a crashed claim: never evidence. Or a FUSE placeholder of
		// the lease just removed (fuse.go), which goes by itself.
		removeTemps(lj, "worker")
		_, err = q.removeSettledDir(q.fd[dLease], q.dirPath(dLease), job, lj)
	}
	if err != nil {
		return err
	}
	step(prefix + ".lease-dir-removed")
	if _, err := removeEntry(q.fd[dClaimed], q.dirPath(dClaimed), job, true); err != nil {
		return err
	}
	step(prefix + ".claim-dir-removed")
	return nil
}

// ReadRequest reads the request of a claimed job through claimed/J,
// without following symlinks, at most MaxRequest bytes.
func (q *Queue) ReadRequest(job string) ([]byte, error) {
	if err := ValidJobName(job); err != nil {
		return nil, fmt.Errorf("%w: job: %v", ErrInvalid, err)
	}
	if h, ok := q.held[job]; ok {
		return readFileAt(h.cj, job, q.ClaimedPath(job), MaxRequest)
	}
	cj, err := openDirAt(q.fd[dClaimed], job)
	if err != nil {
		return nil, pathErr("open", q.path("claimed", job), err)
	}
	defer unix.Close(cj)
	return readFileAt(cj, job, q.ClaimedPath(job), MaxRequest)
}

// nextStep says, for a refusal's message, which command takes job on from
// state: recover where the protocol lets it (with --force when the lease
// holder cannot be proven gone, as recover itself would demand), the
// manual's procedure where only a person may decide. Every command it
// names runs as printed, --root included.
func (q *Queue) nextStep(ev *Evidence, state State) string {
	switch state {
	case StateInterruptedFinish:
		if holderGone(ev, false) != nil {
			return "if no worker still runs it, " + q.command("recover", ev.Job, "--force") + " completes it"
		}
		return q.command("recover", ev.Job) + " completes it"
	case StateResidue:
		return q.command("recover", ev.Job) + " removes the leftovers"
	case StateUnleasedClaim:
		return `reconcile by hand (ctx man ctx.shared, "Reconciling an unleased claim")`
	case StateConflict, StateOrphan:
		return "compare the evidence (" + q.command("check") + ") and reconcile by hand (ctx man ctx.shared)"
	}
	return "see " + q.command("status")
}

// nextStepNow is nextStep for the evidence on disk now.
func (q *Queue) nextStepNow(job string) string {
	ev, err := q.Inspect(job)
	if err != nil {
		return "see " + q.command("check")
	}
	state, _ := Classify(ev)
	return q.nextStep(ev, state)
}

// command renders `ctx queue VERB --root ROOT SPACE ARGS...` for this
// queue, the root given explicitly so that the command works whatever the
// reader's CTX_ROOT is.
func (q *Queue) command(verb string, args ...string) string {
	root := strings.TrimSuffix(q.Dir, string(filepath.Separator)+filepath.Join("shared", q.Space, "queue"))
	return strings.Join(append([]string{"ctx queue", verb, "--root", shellWord(root), q.Space}, args...), " ")
}

// plainWord reports whether a POSIX shell reads s back as itself: one or
// more of A-Z a-z 0-9 _ . / , : @ % + = -. A loop, not a regexp compiled
// at package initialisation, which every applet's start would pay.
func plainWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_./,:@%+=-", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// shellWord quotes s for a POSIX shell when it needs quoting, so a printed
// command can be pasted as it is.
func shellWord(s string) string {
	if plainWord(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
