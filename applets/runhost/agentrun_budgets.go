package runhost

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"ctx/applets/egress"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/fsops/cgroup"
	"ctx/policy"
)

// budgetPoll is how often the run host reads the run's cgroup, refreshes
// /mnt/proc/budgets and checks the run-wide limits.
const budgetPoll = 500 * time.Millisecond

// runBudgets is the run host's side of a run's budgets: the effective
// limits, the cgroup that holds the run (if any), and what was exceeded.
type runBudgets struct {
	limits    policy.Budgets
	cgroup    *cgroup.Run
	cgroupWhy string // why there is no cgroup

	ended sync.Once // endBudgets' work, done once: at the run's end, or by the start's cleanup

	mu       sync.Mutex
	logBytes uint64          // event bytes written for the run
	capped   map[string]bool // keys already reported exceeded
	last     cgroup.Usage
	disk     diskBudget
}

// effectiveBudgets are the agent's budgets capped by every ancestor's
// (a child never gets more than its parent), as far as the lineage loads.
func effectiveBudgets(load func(name string) (*policy.Agent, error), a *policy.Agent) policy.Budgets {
	b := a.Budgets
	if b == nil {
		b = policy.DefaultBudgets()
	}
	seen := map[string]bool{a.Name: true}
	for p := a.Parent.Agent; p != "" && !seen[p] && len(seen) < 64; {
		seen[p] = true
		parent, err := load(p)
		if err != nil {
			break
		}
		b = b.CapBy(parent.Budgets)
		p = parent.Parent.Agent
	}
	return b
}

// limitOrZero is a budget as a cgroup limit: 0 leaves it unset.
func limitOrZero(v uint64) uint64 {
	if v == policy.Unlimited {
		return 0
	}
	return v
}

// startBudgets computes the run's limits and, unless only the plan is
// wanted, makes its cgroup.
func (r *AgentRun) startBudgets(planOnly bool) {
	r.budgets = &runBudgets{limits: effectiveBudgets(r.agents.Load, r.Agent), capped: map[string]bool{}}
	if planOnly {
		r.budgets.cgroupWhy = "not made for --plan"
		return
	}
	b := r.budgets
	r.startDisk()
	infos, _ := r.mounts.Read()
	b.cgroup, b.cgroupWhy = cgroup.New(r.RunID, cgroup.Limits{
		MemoryBytes: limitOrZero(b.limits.Get("memory_bytes")),
		Pids:        limitOrZero(b.limits.Get("pids")),
	}, infos)
}

// budgetExceeded records one budget.exceeded event per key and run.
func (r *AgentRun) budgetExceeded(key, detail string) {
	b := r.budgets
	b.mu.Lock()
	done := b.capped[key]
	b.capped[key] = true
	b.mu.Unlock()
	if done {
		return
	}
	v := policy.FormatBudgetValue(b.limits.Get(key))
	r.recordEvent(fsops.Event{Type: "budget.exceeded", Object: "agent/" + r.Agent.Name, Status: "error",
		Detail: key + "=" + v + ": " + detail})
	r.warnf("%s: budget %s=%s exceeded: %s", r.Agent.Name, key, v, detail)
}

// allowEvent applies log_bytes to the events an agent's activity causes
// (tool calls, connections): past the budget they are counted, not
// written, and the fact is recorded once. The run host's own facts
// (start, stop, budgets) are always written.
func (r *AgentRun) allowEvent(ev fsops.Event, size int) bool {
	b := r.budgets
	if b == nil {
		return true
	}
	b.mu.Lock()
	b.logBytes += uint64(size)
	over := b.logBytes > b.limits.Get("log_bytes")
	b.mu.Unlock()
	if !over || ev.Type != "tool.call" && ev.Type != "net.connect" {
		return true
	}
	r.budgetExceeded("log_bytes", "further tool calls and connections of this run are refused, not made unrecorded")
	return false
}

// logSpent reports whether the run's log_bytes budget is used up: the run
// host then refuses tool calls rather than run them unrecorded.
func (r *AgentRun) logSpent() bool {
	b := r.budgets
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logBytes > b.limits.Get("log_bytes")
}

// watchBudgets runs until stop is closed: it enforces wall_s, watches the
// cgroup's counters (a fork refused at pids, a process killed at
// memory_bytes, the run's CPU past cpu_s) and keeps /mnt/proc/budgets
// current. kill ends the whole run.
func (r *AgentRun) watchBudgets(stop <-chan struct{}, kill func()) {
	b := r.budgets
	var wall <-chan time.Time
	if w := b.limits.Get("wall_s"); w != policy.Unlimited {
		t := time.NewTimer(time.Duration(w) * time.Second)
		defer t.Stop()
		wall = t.C
	}
	tick := time.NewTicker(budgetPoll)
	defer tick.Stop()
	r.writeBudgets()
	for {
		select {
		case <-stop:
			return
		case <-wall:
			r.budgetExceeded("wall_s", "the run is ended")
			kill()
		case <-tick.C:
			r.checkCgroup(kill)
			r.writeBudgets()
		}
	}
}

// checkCgroup reads the run's cgroup and records what the kernel refused
// since the last look; kill (nil at the end of the run) ends the run when
// its CPU time is used up.
func (r *AgentRun) checkCgroup(kill func()) {
	b := r.budgets
	if b == nil || b.cgroup == nil {
		return
	}
	u := b.cgroup.Usage()
	b.mu.Lock()
	prev := b.last
	b.last = u
	b.mu.Unlock()
	if u.PidsMaxHits > prev.PidsMaxHits {
		r.budgetExceeded("pids", "a fork was refused (EAGAIN); the run goes on")
	}
	if u.OOMKills > prev.OOMKills {
		r.budgetExceeded("memory_bytes", "a process was killed at the limit; the run goes on")
	}
	if c := b.limits.Get("cpu_s"); c != policy.Unlimited && u.Known["cpu"] && u.CPUNanos/1e9 >= c && kill != nil {
		r.budgetExceeded("cpu_s", "the run's processes used it up; the run is ended")
		kill()
	}
}

// writeBudgets replaces /mnt/proc/budgets: one line per key, in the
// control's order: KEY=VALUE mechanism=M[ used=N][ why=TEXT].
func (r *AgentRun) writeBudgets() {
	if r.runDir == "" || r.budgets == nil {
		return
	}
	fsops.WriteVolatile(filepath.Join(r.runDir, "budgets"), r.budgetsText(), 0o644)
}

func (r *AgentRun) budgetsText() []byte {
	b := r.budgets
	b.mu.Lock()
	u, logBytes := b.last, b.logBytes
	b.mu.Unlock()
	cg := "none"
	if b.cgroup != nil {
		cg = b.cgroup.Describe()
	}
	shared := r.iso == policy.IsoShared
	var out strings.Builder
	for _, k := range policy.BudgetKeys {
		mech, used, why := "", "", ""
		switch k.Name {
		case "wall_s", "log_bytes":
			mech = "host"
			if k.Name == "log_bytes" {
				used = strconv.FormatUint(logBytes, 10)
			}
		case "record_bytes":
			mech = "host"
		case "memory_bytes", "pids":
			switch {
			case b.cgroup != nil:
				mech = cg
				if k.Name == "pids" && u.Known["pids"] {
					used = strconv.FormatUint(u.Pids, 10)
				}
				if k.Name == "memory_bytes" && u.Known["memory"] {
					used = strconv.FormatUint(u.MemoryBytes, 10)
				}
			case shared:
				mech, why = "none", "iso shared and "+b.cgroupWhy
			default:
				mech, why = "rlimit", "per process, no cgroup: "+b.cgroupWhy
			}
		case "cpu_s":
			switch {
			case b.cgroup != nil && b.cgroup.CountsCPU():
				mech = cg + "+rlimit"
				if u.Known["cpu"] {
					used = strconv.FormatUint(u.CPUNanos/1e9, 10)
				}
			case shared:
				mech, why = "none", "iso shared"
			default:
				mech = "rlimit"
			}
		case "file_bytes", "open_files":
			mech = "rlimit"
			if shared {
				mech, why = "none", "iso shared"
			}
		case "tmp_bytes":
			mech = "tmpfs"
			if shared {
				mech, why = "none", "iso shared has no private /tmp"
			}
		case "disk_bytes":
			mech, used, why = r.diskText(shared)
		case "tool_timeout_s", "tool_output_bytes":
			mech = "tool"
		case "children":
			// agent.start, served by this run host's broker, refuses a
			// child past the limit (EAGAIN, budget.exceeded).
			mech, used = "host", strconv.Itoa(r.liveChildren())
		case "net_bytes", "net_connections":
			mech, used, why = egress.BudgetText(k.Name, networkGranted(r.Agent), r.net)
		}
		fmt.Fprintf(&out, "%s=%s mechanism=%s", k.Name, policy.FormatBudgetValue(b.limits.Get(k.Name)), mech)
		if used != "" {
			out.WriteString(" used=" + used)
		}
		if why != "" {
			out.WriteString(" why=" + strings.ReplaceAll(why, "\n", " "))
		}
		out.WriteString("\n")
	}
	return []byte(out.String())
}

// endBudgets kills whatever is left in the run's cgroup and removes it.
//
// It runs once: when the run's init has exited, and again, as a no-op, in
// the cleanup of every start (a start that never ran removes its cgroup
// there); a second pass read and removed a cgroup already gone, eleven
// failed system calls before the run host's exit.
func (r *AgentRun) endBudgets() {
	if r.budgets == nil || r.budgets.cgroup == nil {
		return
	}
	r.budgets.ended.Do(func() {
		r.checkCgroup(nil) // what the kernel refused since the last look
		r.budgets.cgroup.KillAll()
		r.budgets.cgroup.Remove()
	})
}

// killRun ends the run as a stop does: SIGTERM to the sandbox's init (or
// the program's group), SIGKILL after the grace period.
func (r *AgentRun) killRun(pid int) {
	fsops.SignalProcess(pid, syscall.SIGTERM)
	fsops.SignalGroup(pid, syscall.SIGTERM)
	time.AfterFunc(lifecycle.StopGrace, func() {
		fsops.SignalProcess(pid, syscall.SIGKILL)
		fsops.SignalGroup(pid, syscall.SIGKILL)
		if r.budgets != nil && r.budgets.cgroup != nil {
			r.budgets.cgroup.KillAll()
		}
	})
}
