package runhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/egress"
	"ctx/applets/lifecycle"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/cgroup"
	"ctx/fsops/object"
	"ctx/policy"
	"ctx/policy/sandboxplan"
	"ctx/ptyterm"
)

// AgentRun is everything `ctx agent start` prepares before it starts the
// program: the agent, the session, the run, the projection of its tools and
// the sandbox plan.
type AgentRun struct {
	Root      fsops.Root
	Agent     *policy.Agent
	iso       policy.Iso
	callerUID int
	callerGID int
	Session   string
	RunID     string
	workspace string
	Sess      fsops.SessionFiles
	runtime   string              // the caller's runtime directory, this tree's level (fsops.TreeRuntimeDir)
	treeKey   string              // the tree's key in runtime paths (fsops.Root.RuntimeKey)
	runDir    string              // RUNTIME/TREE/run/RUN: the files shown at /mnt/proc
	runHeld   *os.File            // runDir, locked while this host lives (fsops.MakeHeldDir)
	mounts    fsops.MountInfoOnce // the host's mount table: the cgroup's and the protect search's
	// homeTop, in iso landlock, lets the agent write its home's top
	// (agentrun_landlock_home.go).
	homeTop *sandboxplan.HomeTop
	// secret is the run's secret (fsops/runsecret.go), which every
	// connection from outside the run presents; secretPath its file.
	secret, secretPath string
	pid                int // what setStatus last wrote to the agent's pid control
	pidWritten         bool
	bornInside         bool       // the first process was started inside the run's cgroup
	initJoins          bool       // the init's locked thread joins the run's cgroup itself, and leaves it before the end (letInitJoinCgroup)
	cgTasks            []*os.File // the tasks files handed to that init, closed once it started
	joinCmd            *exec.Cmd  // that init's command: only it is started without StartInside or Add
	socket             string     // the terminal socket (runtime path)
	tools              []sandboxplan.ProjectedTool
	toolLogs           map[string]string // tool name -> its host log file
	exes               map[[2]uint64]bool
	plan               *sandboxplan.Plan
	protect            *protectState // what the start found for the protect control (agentrun_protect.go)
	env                []string
	stderr             io.Writer // where the run's own warnings go (the caller's standard error)
	sop                []byte    // the rendered system prompt: /mnt/SOP, its digest in the identity
	argv               []string
	noConsole          bool // --no-console: the terminal is reachable only through its socket
	rawConsole         bool // --raw: the console terminal gets the output unfiltered
	// allowHostRoot is --allow-host-root: the caller accepts a run as host
	// uid 0 (still without capabilities, behind seccomp).
	allowHostRoot bool
	idmapTree     *os.File // the idmapped workspace for the sandbox, until it starts
	tmplTree      *os.File // a copy of the kept template for the sandbox, until it starts
	planOnly      bool     // --plan: nothing is started, no cgroup made
	chainShown    []string // what the run host showed by itself of the program's chain (agentrun_chain.go)
	budgets       *runBudgets
	// A run ended at once (its disk budget spent) is killed while the
	// host still holds its init (initProc, opened at its start); closeRun
	// takes endMu, so the host never exits mid-kill with part of the
	// tree stopped and not yet killed, and sets ended, after which a
	// late kill does nothing.
	endMu        sync.Mutex
	ended        bool
	initProc     *fsops.Process
	net          *egress.Run                          // the run's egress proxy, when it has one (network.go)
	broker       *Broker                              // the run's tool broker, when it could be bound
	isoAsked     policy.Iso                           // the iso the agent asked for (auto, or a mode)
	earlyErr     error                                // why the early init could not be started (agentrun_early.go)
	probe        func(full bool) policy.HostIsolation // sandbox.ProbeIsolation, or its answer started ahead
	agents       *authority.Agents                    // the start's one reading of the tree's agents
	onTerminal   bool                                 // the program gets a terminal (ctxterm serves it): --terminal, --no-console, or a terminal on stdin
	early        chan earlyInit                       // the init started while the run is prepared (none if it could not be), until run takes it
	earlyPTY     *ptyterm.PTY                         // the PTY the early init was started on (a run on a terminal)
	auditFailing atomic.Bool                          // the last record or reservation failed (warned once until one succeeds)
}

// isoNote says, in the agent.start event, which mode auto chose.
func (r *AgentRun) isoNote() string {
	if r.isoAsked != "" && r.isoAsked != r.iso {
		return " (asked " + string(r.isoAsked) + ")"
	}
	return ""
}

// closeIDMap drops the host's copy of the idmapped workspace tree.
func (r *AgentRun) closeIDMap() {
	if r.idmapTree != nil {
		r.idmapTree.Close()
		r.idmapTree = nil
	}
	if r.tmplTree != nil {
		r.tmplTree.Close()
		r.tmplTree = nil
	}
}

// projectTools computes the tools agent a may execute: the first trusted
// hit of each name through its tool path, kept when the full check allows
// it. Tiers and tools the trust rule sets aside (DESIGN §16 rule 8) are no
// candidates at all. It also returns one line per candidate, skipped tier
// and skipped tool for /mnt/proc/policy. Nothing is written: visibility is
// computed, never materialised.
//
// agents is the reading of the tree's agents the decision is made on (a
// start's, shared with its budgets; a fresh one for each of the run
// host's refreshes).
func projectTools(agents *authority.Agents, a *policy.Agent) ([]sandboxplan.ProjectedTool, []string) {
	root := agents.Root()
	tp := agents.TrustedToolDirs(a)
	var tools []sandboxplan.ProjectedTool
	var lines []string
	for _, s := range tp.Skipped {
		lines = append(lines, policy.TierSkipLine(s.Tier, s.Reason))
	}
	dirs := tp.Dirs
	hits, skipped := tp.List()
	for _, s := range skipped {
		lines = append(lines, policy.ToolSkipLine(s.Tool, s.Reason))
	}
	for _, hit := range hits {
		d := authority.CheckHit(a, authority.View(root, a), hit)
		if !d.Allowed {
			lines = append(lines, fmt.Sprintf("tool:%s execute rejected %s", hit.Name, d.Layer))
			continue
		}
		lines = append(lines, fmt.Sprintf("tool:%s execute granted", hit.Name))
		tier := tp.Tiers[indexOf(dirs, hit.Dir)]
		schema, schemaErr := fsops.ReadControl(filepath.Join(hit.ControlDir, "schema"))
		if schemaErr != nil {
			schema = []byte("{}\n")
		}
		t := sandboxplan.ProjectedTool{Name: hit.Name, Tier: tier, HostPath: hit.Path, HostDotD: hit.ControlDir, Schema: schema}
		if loc, err := fsops.ReadControl(filepath.Join(hit.ControlDir, "mcp")); err == nil {
			if l, err := object.ParseLocator(loc); err == nil {
				t.MCPServer, t.MCPTool = l.Server, l.Tool
			}
		}
		// No schema control: the tool may describe itself (toolspec_self.go).
		if errors.Is(schemaErr, fs.ErrNotExist) && t.MCPServer == "" {
			if s, _, ok := toolrun.SelfDescribed(hit, a.UID, a.GID); ok {
				t.SelfSpec = toolrun.SelfToolSpec(t, s)
			}
		}
		tools = append(tools, t)
	}
	return tools, lines
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return 0
}

// sharedGrants finds the shared spaces agent a may read or write. The
// decision is authority.SharedGrant's, the same the tool-trust rule uses to
// find the spaces an agent may write.
func sharedGrants(root fsops.Root, a *policy.Agent) ([]sandboxplan.SharedGrant, []string) {
	var grants []sandboxplan.SharedGrant
	var lines []string
	for _, space := range authority.SharedSpaces(root) {
		dir := root.SharedDir(space)
		canRead, canWrite := authority.SharedGrant(root, a, space)
		switch {
		case canWrite:
			grants = append(grants, sandboxplan.SharedGrant{Space: space, HostDir: dir, Write: true})
			lines = append(lines, "shared:"+space+" write granted")
		case canRead:
			grants = append(grants, sandboxplan.SharedGrant{Space: space, HostDir: dir})
			lines = append(lines, "shared:"+space+" read granted")
		}
	}
	return grants, lines
}

// networkGranted reports allow SUBJECT network:default connect.
func networkGranted(a *policy.Agent) bool {
	d := policy.Check(a, policy.View{}, policy.Object{Class: policy.ClassNetwork, Name: policy.NetworkDefault}, policy.PermConnect, policy.Facts{})
	return d.Allowed
}

// renderSOP is the agent's system prompt for /mnt/SOP: prompt.template.md
// with {{agent}} filled in when present, else system.md. Prompt text grants
// nothing; it is shown, never interpreted.
func renderSOP(root fsops.Root, name string) []byte {
	dir := root.AgentControl(name)
	if b, err := fsops.ReadControl(filepath.Join(dir, "prompt.template.md")); err == nil {
		return bytes.ReplaceAll(b, []byte("{{agent}}"), []byte(name))
	}
	b, _ := fsops.ReadControl(filepath.Join(dir, "system.md"))
	return b
}

// makeRunDir makes the run directory, whose files are shown read-only at
// /mnt/proc, with those that do not depend on the tools: the identity,
// the audit (begun with the session's recent events: sessionAuditTail)
// and, in iso landlock, the SOP.
func (r *AgentRun) makeRunDir() error {
	parent := filepath.Join(r.runtime, "run")
	name := r.RunID
	if r.iso == policy.IsoLandlock {
		// No mount shows the run's files at /mnt/proc: the agent reaches
		// them on the host, where a root caller's runtime directory is
		// closed to it. They live in the agent's home instead, in a
		// directory the host owns (Landlock keeps the agent from
		// renaming it), short enough for the broker's socket path.
		parent = filepath.Join(r.Root.AgentHome(int(r.Agent.UID), r.Agent.Name), "run")
		name = strings.TrimPrefix(r.RunID, "ctx-")[:12]
	}
	if err := fsops.MkdirNoFollow(parent, 0o755); err != nil {
		return err
	}
	held, err := fsops.MakeHeldDir(parent, name, 0o755)
	if err != nil {
		return err
	}
	r.runDir, r.runHeld = held.Name(), held
	r.sweepRunDirs(parent)
	if err := r.makeSecret(); err != nil {
		return err
	}
	r.sop = renderSOP(r.Root, r.Agent.Name)
	id := policy.Identity{Agent: r.Agent.Name, Label: r.Agent.Label, Subject: r.Agent.Subject,
		UID: r.Agent.UID, GID: r.Agent.GID, Session: r.Session, Run: r.RunID}
	id.SOP, id.SOPSHA256 = lifecycle.SopPointer(r.sop)
	if r.iso == policy.IsoLandlock {
		// No mount shows /mnt/SOP: the prompt is a file of the run's own
		// (CTX_RUN_DIR/SOP), and the identity points there.
		id.SOP = filepath.Join(r.runDir, "SOP")
		if err := os.WriteFile(id.SOP, r.sop, 0o644); err != nil {
			return err
		}
	}
	// Runtime files of one run, removed at its end: no fsync needed.
	for name, data := range map[string][]byte{"identity": id.Format(), "audit": sessionAuditTail(r.Sess.Events)} {
		if err := os.WriteFile(filepath.Join(r.runDir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sweepRunDirs removes the run directories in parent that no living run
// host holds (fsops.SweepUnheld): those of hosts killed with SIGKILL,
// which could not remove their own. The cgroups such runs leave go with
// them.
func (r *AgentRun) sweepRunDirs(parent string) {
	swept := fsops.SweepUnheld(parent, func(name string) bool {
		if r.iso == policy.IsoLandlock {
			return policy.IsLowerHex(name, 12)
		}
		return fsops.IsRunID(name)
	})
	for _, name := range swept {
		os.Remove(fsops.RunSecretPath(r.runtime, name)) // its host died before removing it
	}
	if len(swept) > 0 && r.iso != policy.IsoLandlock {
		cgroup.RemoveRuns(swept)
	}
}

// removeRunDir removes the run directory, and lets it go.
func (r *AgentRun) removeRunDir() {
	if r.runDir == "" {
		return
	}
	os.RemoveAll(r.runDir)
	if r.secretPath != "" {
		os.Remove(r.secretPath)
	}
	r.runHeld.Close()
	r.runDir, r.runHeld = "", nil
}

// writeRunDir writes the rest of the run directory: the policy and the
// budgets.
func (r *AgentRun) writeRunDir(policyLines []string) error {
	sort.Strings(policyLines)
	for name, data := range map[string][]byte{
		"policy":  []byte(strings.Join(policyLines, "\n") + "\n"),
		"budgets": r.budgetsText(),
	} {
		if err := os.WriteFile(filepath.Join(r.runDir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// executables are the files whose processes may report tool calls on the
// run capability: the ctx binary and every projected tool, by device and
// inode as the host sees them.
func (r *AgentRun) collectExecutables() {
	r.exes = map[[2]uint64]bool{}
	add := func(p string) {
		if st, err := fsops.Stat(p); err == nil {
			r.exes[[2]uint64{st.Dev, st.Ino}] = true
		}
	}
	add(r.Root.Path("bin", "ctx"))
	if self, err := fsops.Executable(); err == nil {
		add(self)
	}
	r.toolLogs = map[string]string{}
	for _, t := range r.tools {
		add(t.HostPath)
		r.toolLogs[t.Name] = filepath.Join(t.HostDotD, "log")
	}
}

// setStatus writes agent/NAME.d/status and pid.
func (r *AgentRun) setStatus(status string, pid int) {
	dir := r.Root.AgentControl(r.Agent.Name)
	fsops.WriteVolatile(filepath.Join(dir, "status"), []byte(status+"\n"), 0o644)
	if r.pidWritten && pid == r.pid {
		return // the same pid (start, then ready): a replace costs a flush on ext4
	}
	p := ""
	if pid > 0 {
		p = strconv.Itoa(pid) + "\n"
	}
	fsops.WriteVolatile(filepath.Join(dir, "pid"), []byte(p), 0o644)
	r.pid, r.pidWritten = pid, true
}

// handleRunMessage accepts one message from the run capability (a run
// without a broker has one): a tool call. The host sets agent, session
// and run itself. A report from a
// process that is not executing ctx or a projected tool (checked by device
// and inode while the sender waits) is still recorded, since refusals are
// worth keeping, but marked unverified: it may be invented.
func (r *AgentRun) handleRunMessage(pid int, data []byte) error {
	st, err := fsops.Stat("/proc/" + strconv.Itoa(pid) + "/exe")
	verified := err == nil && r.exes[[2]uint64{st.Dev, st.Ino}]
	var msg authority.RunMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		return fmt.Errorf("malformed message: %v", err)
	}
	if msg.Op != "event" || msg.Event == nil || msg.Event.Type != "tool.call" {
		return errors.New("unsupported message")
	}
	name, ok := strings.CutPrefix(msg.Event.Object, "tool/")
	if !ok || policy.ValidName(name) != nil {
		return fmt.Errorf("event for an invalid object %q", msg.Event.Object)
	}
	ev := *msg.Event
	ev.PID = pid
	if !verified {
		ev.Detail = "unverified: reported by a process that is not executing ctx or a projected tool"
	}
	r.recordEvent(ev)
	return nil
}

// withoutVar is env without the variable key.
func withoutVar(env []string, key string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// warnf prints one line of the run's own ("ctx agent: ...") on the
// caller's standard error, escaped (cli.Errorf); nowhere when the run has
// no caller's stream (a test's agentRun).
func (r *AgentRun) warnf(format string, args ...any) {
	if r.stderr != nil {
		cli.Errorf(r.stderr, "ctx agent", format, args...)
	}
}

// within reports whether p is dir or below it, by whole components.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
