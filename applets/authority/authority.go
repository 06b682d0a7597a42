// Package authority adapts the on-disk tree to the policy package's
// decisions for the applets that act on them (tools, tsh, ctx policy
// explain, ctx agent start): it finds the current agent context, loads an
// agent, gathers the facts a check needs, and reports tool calls to the run
// host. It decides nothing itself: policy.Check does.
package authority

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"ctx/fsops"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// Context reports whether this process runs as an agent: the sandbox
// identity file when present (authoritative, and read-only inside the
// sandbox), else the CTX_AGENT/CTX_SESSION/CTX_RUN_ID environment of an
// iso=shared run (forgeable by the same uid), else none. A present but
// unreadable or malformed identity file is an error, never a fall back.
func Context(getenv func(string) string) (policy.AgentContext, error) {
	identity, err := fsops.ReadControl(policy.IdentityPath)
	if errors.Is(err, fs.ErrNotExist) {
		identity, err = nil, nil
	}
	if err != nil {
		return policy.AgentContext{}, err
	}
	return policy.DetectContext(identity, getenv)
}

// ErrNoAgent is returned by LoadAgent when agent/NAME.d does not exist.
var ErrNoAgent = errors.New("unknown agent")

// LoadAgent reads and parses agent/NAME.d under root. A missing agent wraps
// ErrNoAgent; a symlinked control directory or an invalid control is an
// error naming the file.
func LoadAgent(root fsops.Root, name string) (*policy.Agent, error) {
	if err := policy.ValidName(name); err != nil {
		return nil, fmt.Errorf("agent %w", err)
	}
	dir := root.AgentControl(name)
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// The first command a new user types names an agent of a tree
		// that may not exist yet: say which command makes what is missing.
		hint := "ctx agent new" + root.Option() + " " + name + " makes one; ctx agent ps" + root.Option() + " lists the agents"
		if _, err := os.Stat(root.AgentDir()); err != nil {
			hint = "no ctx tree at " + root.Dir + ": ctx bootstrap" + root.Option() + " makes one, with the agents coder and architect"
		}
		return nil, fmt.Errorf("%w %s (no %s; %s)", ErrNoAgent, name, dir, hint)
	case err != nil:
		return nil, err
	case !st.IsDir():
		// A symlinked control directory is refused like a symlinked
		// control file: an agent's authority is never read through one.
		return nil, fmt.Errorf("%s is not a directory (a %s)", dir, st.Mode().Type())
	}
	controls, err := fsops.ReadControls(dir, policy.AgentControlNames)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", name, err)
	}
	a, err := policy.ParseAgent(name, controls)
	if err != nil {
		// The error starts with the control's file name: prefixing the
		// directory names the exact file, agent/coder.d/perm: line 1: ...
		return nil, fmt.Errorf("agent/%s.d/%w", name, err)
	}
	return a, nil
}

// Reroot maps a path as the agent sees it (/ctx/...) to the host path
// under root; paths outside /ctx are host paths already. Inside a sandbox
// the root is /ctx and nothing changes.
func Reroot(root fsops.Root, p string) string {
	if p == sandboxplan.SandboxRoot {
		return root.Dir
	}
	if rest, ok := strings.CutPrefix(p, sandboxplan.SandboxRoot+"/"); ok {
		return filepath.Join(root.Dir, rest)
	}
	return p
}

// ToolDirs is the agent's tool path (its path control) on the host.
func ToolDirs(root fsops.Root, a *policy.Agent) []string {
	dirs := make([]string, len(a.Path))
	for i, d := range a.Path {
		dirs[i] = Reroot(root, d)
	}
	return dirs
}

// View is the agent's mount view as far as the tree shows it: the /ctx tree
// itself, read-only, then the agent's own mount control, whose /ctx/...
// sources are re-rooted as the sandbox plan re-roots them. The sandbox adds
// system directories and /workspace, which hold no tools or shared spaces.
func View(root fsops.Root, a *policy.Agent) policy.View {
	view := policy.View{Mounts: []policy.Mount{{Source: root.Dir, Target: sandboxplan.SandboxRoot, ReadOnly: true}}}
	for _, m := range a.Mounts {
		m.Source = Reroot(root, m.Source)
		view.Mounts = append(view.Mounts, m)
	}
	return view
}

// ToolFacts finds tool name through the agent's tool path as CTX_PATH
// lookup does, over the tiers and tools the trust rule keeps (see
// TrustedToolDirs), and reads its policy. A tool that is not found leaves
// File nil, which the check refuses.
func ToolFacts(root fsops.Root, a *policy.Agent, name string) (policy.Facts, fsops.ToolHit) {
	return TrustedToolDirs(root, a).ToolFacts(name)
}

// ToolFacts finds tool name through p as CTX_PATH lookup does (trusted
// tools only) and reads its policy; a tool not found leaves File nil.
func (p ToolPath) ToolFacts(name string) (policy.Facts, fsops.ToolHit) {
	hit, err := p.Lookup(name)
	if err != nil {
		return policy.Facts{}, hit
	}
	return HitFacts(hit), hit
}

// HitFacts gathers the facts of one CTX_PATH hit: its file and its policy.
func HitFacts(hit fsops.ToolHit) policy.Facts {
	facts := policy.Facts{File: StatFacts(hit.Path, hit.Info)}
	data, err := fsops.ReadControl(filepath.Join(hit.ControlDir, "policy"))
	if err != nil {
		facts.ToolPolicyErr = err
		return facts
	}
	facts.ToolPolicy, err = policy.ParsePolicy(data)
	if err != nil {
		// "policy: line 2: ..." becomes "/ctx/tool/T.d/policy: line 2: ...".
		facts.ToolPolicyErr = errors.New(filepath.Join(hit.ControlDir, "policy") + strings.TrimPrefix(err.Error(), "policy"))
	}
	return facts
}

// FileFacts lstats path; nil when it does not exist.
func FileFacts(path string) *policy.FileFacts {
	info, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	return StatFacts(path, info)
}

// StatFacts converts an Lstat result.
func StatFacts(path string, info fs.FileInfo) *policy.FileFacts {
	ff := &policy.FileFacts{Path: path, Mode: info.Mode()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		ff.UID, ff.GID = st.Uid, st.Gid
	}
	return ff
}

// CheckHit decides whether agent a, with mount view v, may execute the tool
// at hit.
func CheckHit(a *policy.Agent, v policy.View, hit fsops.ToolHit) policy.Decision {
	return policy.Check(a, v, policy.Object{Class: policy.ClassTool, Name: hit.Name}, policy.PermExecute, HitFacts(hit))
}

// CheckTool decides whether the caller, an agent, may execute tool name,
// found through its own tool path as the caller sees it, over the tiers
// and tools the trust rule keeps for the caller (see Caller.Trust).
func (c Caller) CheckTool(name string) policy.Decision {
	p := c.Trust().Filter(c.Agent.Path, ToolDirs(c.Root, c.Agent))
	facts, _ := p.ToolFacts(name)
	return policy.Check(c.Agent, c.View(), policy.Object{Class: policy.ClassTool, Name: name}, policy.PermExecute, facts)
}

// CheckTrustedHit is CheckHit preceded by the trust rule for the hit (its
// tier, file and control directory) as the caller sees the tree: a tool
// found before its tier became untrusted is refused by layer tool-trust.
func (c Caller) CheckTrustedHit(hit fsops.ToolHit) policy.Decision {
	if ok, reason := c.Trust().Tool(hit); !ok {
		return policy.Decision{Layer: policy.LayerTrust, Errno: syscall.EACCES, Reason: reason,
			Verdicts: []policy.Verdict{{Layer: policy.LayerTrust, Reason: reason}}}
	}
	return CheckHit(c.Agent, c.View(), hit)
}

// Caller is the authority context of this process: no agent (a person), or
// an agent with its parsed definition.
type Caller struct {
	Context policy.AgentContext
	Agent   *policy.Agent // nil outside an agent context
	Root    fsops.Root
}

// CurrentCaller finds this process's context and, in an agent context,
// loads the agent from CTX_ROOT (/ctx inside a sandbox). Any failure to
// establish an agent context that exists is an error: it must refuse,
// never run unchecked.
func CurrentCaller(getenv func(string) string) (Caller, error) {
	ctx, err := Context(getenv)
	if err != nil {
		return Caller{}, err
	}
	c := Caller{Context: ctx, Root: fsops.SelectRoot("", getenv)}
	if ctx.Source == policy.ContextNone {
		return c, nil
	}
	if ctx.Source == policy.ContextSandbox {
		// Inside the sandbox the tree is at /ctx, whatever the
		// environment claims.
		c.Root = fsops.Root{Dir: sandboxplan.SandboxRoot}
	}
	c.Agent, err = LoadAgent(c.Root, ctx.Agent)
	return c, err
}

// InAgent reports whether the caller is an agent.
func (c Caller) InAgent() bool { return c.Agent != nil }

// View is the caller's mount view: inside a sandbox the real one (its
// mount table); elsewhere the one computed from the tree and the agent's
// mount control (see View).
func (c Caller) View() policy.View {
	if c.Context.Source == policy.ContextSandbox {
		if table, err := fsops.MountTable(); err == nil {
			return policy.View{Mounts: table}
		}
		return policy.View{} // nothing is visible: every check refuses
	}
	return View(c.Root, c.Agent)
}
