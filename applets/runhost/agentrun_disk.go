package runhost

import (
	"fmt"
	"strconv"
	"time"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy"
)

// The disk_bytes budget: what the agent's home (home/UID/agent/NAME: its
// data, cache, root, log and anything else it keeps there; not session/,
// the run host's records, bounded by log_bytes and record_bytes) may hold.
// The workspace is the person's directory and does not count.
//
// The kernel offers no limit on what a directory holds short of project
// quotas, which need a filesystem mounted with them (and root); ctx does
// not set those up. The run host enforces it instead: it measures the home
// when the run starts (a home at or over the budget is refused, exit 69),
// caps every file the run writes at the room left (RLIMIT_FSIZE, through
// file_bytes: one file never passes the budget), measures again every
// diskPoll or so while the run lasts, and ends the run at once, no grace,
// when the home is over. What the run writes in many files between
// two looks is the slack (ctx man agent).

// diskPoll is the least time between two looks at the home: a look at a
// home of a few hundred files takes well under a millisecond.
const diskPoll = 100 * time.Millisecond

// diskBudget is the run host's knowledge of the home's use.
type diskBudget struct {
	home string        // the agent's home; "" when not measured (unlimited, --plan)
	used uint64        // bytes, at the last look
	err  error         // why the last look failed
	took time.Duration // how long the last look took
	// first is closed once the first look is made (or none will be).
	first chan struct{}
}

// diskSkip are the home's entries disk_bytes leaves out: the run host's.
var diskSkip = []string{"session"}

// measureDisk looks at the home once and keeps what it saw.
func (r *AgentRun) measureDisk() (uint64, error) {
	b := r.budgets
	b.mu.Lock()
	home := b.disk.home
	b.mu.Unlock()
	t0 := time.Now()
	used, err := fsops.DiskUsage(home, diskSkip...)
	b.mu.Lock()
	b.disk.used, b.disk.err, b.disk.took = used, err, time.Since(t0)
	b.mu.Unlock()
	return used, err
}

// startDisk begins the first look, made on a goroutine of its own while
// the run is prepared: its walk grows with the home's files, and nothing
// but the start's check (checkDiskAtStart) waits for it, not the run's
// cgroup, its init or the tools.
func (r *AgentRun) startDisk() {
	d := &r.budgets.disk
	d.first = make(chan struct{})
	if r.budgets.limits.Get("disk_bytes") == policy.Unlimited {
		close(d.first)
		return
	}
	d.home = r.Root.AgentHome(int(r.Agent.UID), r.Agent.Name)
	go func() {
		defer close(d.first)
		r.measureDisk()
	}()
}

// checkDiskAtStart refuses a run whose home is already at or over
// disk_bytes, or cannot be measured: nothing of it starts, the fact is
// recorded, one line says why.
func (r *AgentRun) checkDiskAtStart(e *cli.Env) (int, bool) {
	b := r.budgets
	if b.disk.first != nil {
		<-b.disk.first
	}
	b.mu.Lock()
	d := b.disk
	b.mu.Unlock()
	limit := b.limits.Get("disk_bytes")
	if d.home == "" || (d.err == nil && d.used < limit) {
		return 0, true
	}
	what := fmt.Sprintf("the home holds %d bytes; the run is refused", d.used)
	if d.err != nil {
		what = fmt.Sprintf("the home cannot be measured (%v); the run is refused", d.err)
	}
	b.mu.Lock()
	b.capped["disk_bytes"] = true
	b.mu.Unlock()
	v := policy.FormatBudgetValue(limit)
	r.recordEvent(fsops.Event{Type: "budget.exceeded", Object: "agent/" + r.Agent.Name, Status: "error",
		Detail: "disk_bytes=" + v + ": " + what})
	return cli.Fail(e, cli.Unavailable, "agent %s: budget disk_bytes=%s exceeded: %s (home %s, session records not counted); free some, or raise it in agent/%s.d/budgets",
		r.Agent.Name, v, what, d.home, r.Agent.Name), false
}

// planBudgets are the limits the run's processes start with: the run's,
// file_bytes capped at the room left under disk_bytes.
func (r *AgentRun) planBudgets() policy.Budgets {
	b := r.budgets
	b.mu.Lock()
	d := b.disk
	b.mu.Unlock()
	if d.home == "" || d.err != nil {
		return b.limits
	}
	return b.limits.WithDiskRoom(b.limits.Get("disk_bytes") - d.used)
}

// watchDisk looks at the home until stop is closed and ends the run at
// once (end) when it holds more than disk_bytes or can no longer be
// measured. The looks are spaced so that measuring takes at most a
// twentieth of the time (a home of many files is looked at less often).
func (r *AgentRun) watchDisk(stop <-chan struct{}, end func()) {
	b := r.budgets
	if b.disk.home == "" {
		return
	}
	for {
		b.mu.Lock()
		wait := max(diskPoll, 20*b.disk.took)
		b.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		if r.diskOver("the run is ended") {
			end()
			return
		}
	}
}

// diskOver looks at the home and records the budget's hit, with what
// follows from it, when it is over.
func (r *AgentRun) diskOver(follows string) bool {
	used, err := r.measureDisk()
	limit := r.budgets.limits.Get("disk_bytes")
	switch {
	case err != nil:
		r.budgetExceeded("disk_bytes", fmt.Sprintf("the home cannot be measured (%v); %s", err, follows))
	case used > limit:
		r.budgetExceeded("disk_bytes", "the home holds "+strconv.FormatUint(used, 10)+" bytes; "+follows)
	default:
		return false
	}
	return true
}

// endDisk is the last look, when the run has ended: a home left over the
// budget is recorded (its next start is refused).
func (r *AgentRun) endDisk() {
	if r.budgets == nil || r.budgets.disk.home == "" {
		return
	}
	r.diskOver("its next start is refused")
}

// endRunNow ends the run without the grace a stop gives: a run over its
// disk budget must stop writing now. The run's cgroup, where there is
// one, and the process tree below the run's first process are killed
// (a pid namespace dies with its init; without one, the tree is stopped
// first so nothing forks away).
func (r *AgentRun) endRunNow(pid int) {
	r.endMu.Lock()
	defer r.endMu.Unlock()
	if r.ended {
		return
	}
	if cg := r.budgets.cgroup; cg != nil {
		cg.KillAll()
	}
	fd := -1
	if r.initProc != nil {
		fd = r.initProc.FD()
	}
	proc.KillTree(pid, fd)
}

// diskText is disk_bytes' line of /mnt/proc/budgets: its mechanism, the
// home's use at the last look, and why when nothing enforces it.
func (r *AgentRun) diskText(shared bool) (mech, used, why string) {
	b := r.budgets
	b.mu.Lock()
	d := b.disk
	b.mu.Unlock()
	switch {
	case d.home == "":
		return "none", "", "unlimited: the home is not measured"
	case shared:
		mech = "host"
	default:
		mech = "host+rlimit"
	}
	if d.err == nil {
		used = strconv.FormatUint(d.used, 10)
	}
	return mech, used, ""
}
