package runhost

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// The run host's recording, fail-closed (DESIGN §8 and §16, rule 15): a
// call is executed only once room for its record is reserved in every
// file the record goes to (the session's events, the agent's log, the
// tool's log); a record that still cannot be written whole is rolled back
// (fsops.AppendLine) and the call's caller is told 69 instead of its
// status, so no call returns as if recorded without its line.

// recordReserve is the room reserved per call in flight: one event line
// (fsops bounds a line under 4 KiB).
const recordReserve = 4096

// recordTarget is one file an event is recorded in, with its role for
// messages (a sandboxed caller is not told the host's paths).
type recordTarget struct {
	path, role string
	log        bool // a shared log, rotated (fsops.AppendLog)
}

// recordTargets are the files that must hold an event of this run: the
// session's events, the agent's log and, for a tool call, the tool's log.
func (r *AgentRun) recordTargets(ev fsops.Event) []recordTarget {
	var ts []recordTarget
	if r.Sess.Events != "" {
		ts = append(ts, recordTarget{r.Sess.Events, "the session's events", false})
	}
	ts = append(ts, recordTarget{filepath.Join(r.Root.AgentControl(r.Agent.Name), "log"), "the agent's log", true})
	if ev.Type == "tool.call" {
		if log, ok := r.toolLogs[strings.TrimPrefix(ev.Object, "tool/")]; ok {
			ts = append(ts, recordTarget{log, "the tool's log", true})
		}
	}
	return ts
}

// errLogBudget is an event not written because log_bytes is spent.
var errLogBudget = errors.New("the run's log budget (log_bytes) is spent")

// recordEvent appends one event of this run to the session, the agent's
// log, the tool's log (for tool calls) and the audit tail at /mnt/proc.
// Each file gets the whole line or nothing; the first failure is returned
// (the audit tail, a copy for the agent, is best effort).
func (r *AgentRun) recordEvent(ev fsops.Event) error {
	return r.record(ev, false)
}

// record is recordEvent; ran marks the event of a call that was executed,
// which is written even past log_bytes (it was admitted before the
// budget was spent: its record was promised).
func (r *AgentRun) record(ev fsops.Event, ran bool) error {
	ev.Agent, ev.Session, ev.Run = r.Agent.Name, r.Session, r.RunID
	line := ev.Line()
	if !r.allowEvent(ev, len(line)) && !ran {
		return errLogBudget
	}
	var first error
	for _, t := range r.recordTargets(ev) {
		write := fsops.AppendLine
		if t.log {
			write = fsops.AppendLog
		}
		if err := write(t.path, line); err != nil && first == nil && !notOurs(t, err) {
			first = fmt.Errorf("%s: %v", t.role, errnoOf(err))
		}
	}
	if r.runDir != "" {
		fsops.AppendLine(filepath.Join(r.runDir, "audit"), line)
	}
	r.auditState(first)
	return first
}

// reserveRecord reserves room for the record of one more call of tool, on
// top of those in flight: nil when it could be made, else why not.
func (b *Broker) reserveRecord(tool string, inFlight int64) error {
	if b.R.logSpent() {
		return fmt.Errorf("%v: tool calls are not run unrecorded", errLogBudget)
	}
	ev := fsops.Event{Type: "tool.call", Object: "tool/" + tool}
	for _, t := range b.R.recordTargets(ev) {
		if err := fsops.ReserveAppend(t.path, recordReserve*(inFlight+1)); err != nil && !notOurs(t, err) {
			err = fmt.Errorf("%s: %v", t.role, errnoOf(err))
			b.R.auditState(err)
			return fmt.Errorf("the audit cannot be written (%v): tool calls are not run unrecorded", err)
		}
	}
	return nil
}

// auditState notes whether recording works (err nil) and, when it stops
// working, says so once on the run's standard error.
func (r *AgentRun) auditState(err error) {
	if err == nil {
		r.auditFailing.Store(false)
		return
	}
	if r.auditFailing.CompareAndSwap(false, true) {
		r.warnf("%s: the audit cannot be written (%v): tool calls are refused (69) until it can", r.Agent.Name, err)
	}
}

// notOurs reports whether err says a shared log is not the run host's to
// write (a tool's log in the system tier, owned by root, for a person's
// run): that log is skipped, as a direct call's unwritable log is, and the
// session's events and the other log are the record. A full disk or an
// I/O error is never that.
func notOurs(t recordTarget, err error) bool {
	errno, ok := errnoOf(err).(unix.Errno)
	return t.log && ok && (errno == unix.EACCES || errno == unix.EPERM || errno == unix.EROFS)
}

// errnoOf is err's errno when it has one (the path left out), else err.
func errnoOf(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
