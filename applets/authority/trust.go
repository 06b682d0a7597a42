package authority

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"ctx/fsops"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// The tool-trust rule (DESIGN §16 rule 8, policy.TierTrust) for every
// consumer of an agent's tool path: the run host's projection and
// /mnt/proc/policy, tsh, ctx policy explain, ctxmcp serve, a tool's own
// re-check and ctx doctor. This file gathers the facts (fsops walks the
// tree) and hands them to policy, which decides.

// ProcPolicyPath is /mnt/proc/policy, the run host's verdicts as the
// sandbox shows them.
var ProcPolicyPath = path.Join(path.Dir(policy.IdentityPath), "policy")

// Trust applies the tool-trust rule to the tool directories of one tree as
// this process sees it. Verdicts are cached per tier for the life of the
// value: make a new one for each decision that must see the tree as it is.
type Trust struct {
	facts policy.TrustFacts
	err   error // the tree's facts could not be gathered: nothing is trusted

	// Inside a sandbox: the agent's own tiers were judged by the run host,
	// with facts of the whole tree the sandbox does not show (every
	// agent's uid and grants); its verdicts are in /mnt/proc/policy, and
	// the tools it projected into those tiers are the ones it trusted.
	judged     map[string]bool
	hostPolicy []byte
	hostErr    error

	tiers map[string]tierVerdict
}

type tierVerdict struct {
	ok     bool
	reason string
	chain  []policy.FileFacts
	host   bool // a tier the run host judged
}

// LoadTrust gathers the trust facts of the tree at root as the host sees
// it: the tree owner, the uid of every agent, and the directories each
// agent may write (its home, the shared spaces it is granted write on, the
// read-write entries of its mount control). An agent whose definition does
// not load cannot start, so it writes nothing; its uid still counts.
func LoadTrust(root fsops.Root) *Trust {
	return loadTrust(root, func(name string) (*policy.Agent, error) { return LoadAgent(root, name) })
}

// loadTrust is LoadTrust with the agents read by load.
func loadTrust(root fsops.Root, load func(name string) (*policy.Agent, error)) *Trust {
	t := &Trust{tiers: map[string]tierVerdict{}}
	t.facts.Root = root.Dir
	t.facts.AgentUIDs = map[uint32]string{}
	st, err := os.Stat(root.Dir)
	if err != nil {
		t.err = err
		return t
	}
	t.facts.TreeOwner = ownerOf(st)
	entries, err := os.ReadDir(root.AgentDir())
	if err != nil && !os.IsNotExist(err) {
		t.err = err // the agents cannot be known: nothing is trusted
		return t
	}
	spaces := SharedSpaces(root)
	for _, en := range entries {
		name, ok := strings.CutSuffix(en.Name(), ".d")
		if !ok || policy.ValidName(name) != nil {
			continue
		}
		a, err := load(name)
		if err != nil {
			if b, err := fsops.ReadControl(filepath.Join(root.AgentControl(name), "uid")); err == nil {
				if uid, err := policy.ParseID("uid", b); err == nil {
					t.addUID(uid, name)
				}
			}
			continue
		}
		t.addUID(a.UID, name)
		if !t.trustedDefinition(root, name) {
			// Another uid defined it: only that uid may start it, as
			// itself, writing no more than it could anyway, which the
			// owner rule covers. Counting its mount control would let
			// anyone with a foothold in agent/ make every tier
			// untrusted (a mount of tool/ read-write).
			continue
		}
		add := func(dir string) {
			t.facts.Writers = append(t.facts.Writers, policy.TrustWriter{Dir: filepath.Clean(dir), Agent: name})
		}
		add(root.AgentHome(int(a.UID), name))
		for _, space := range spaces {
			if _, write := SharedGrant(root, a, space); write {
				add(root.SharedDir(space))
			}
		}
		for _, m := range a.Mounts {
			if !m.ReadOnly {
				add(Reroot(root, m.Source))
			}
		}
	}
	return t
}

// trustedDefinition reports whether agent name's control directory
// belongs to root or the tree owner: no other uid can have made one of
// theirs (fsops.CheckAgentDef judges the whole definition at start).
func (t *Trust) trustedDefinition(root fsops.Root, name string) bool {
	info, err := os.Lstat(root.AgentControl(name))
	if err != nil {
		return true // counted, as before: the conservative side
	}
	uid := ownerOf(info)
	return uid == 0 || uid == t.facts.TreeOwner
}

func (t *Trust) addUID(uid uint32, agent string) {
	if _, ok := t.facts.AgentUIDs[uid]; !ok {
		t.facts.AgentUIDs[uid] = agent
	}
}

// sandboxTrust is the trust of a process inside agent a's sandbox: the run
// host's verdicts for a's own tiers; for any other directory (a CTX_PATH
// the agent changed, a tier outside /ctx) the rule applied to what the
// sandbox shows, where every read-write mount is writable by a.
func sandboxTrust(a *policy.Agent) *Trust {
	t := &Trust{tiers: map[string]tierVerdict{}, judged: map[string]bool{}}
	t.facts.Root = sandboxplan.SandboxRoot
	t.facts.AgentUIDs = map[uint32]string{a.UID: a.Name}
	for _, tier := range a.Path {
		if under(tier, sandboxplan.SandboxRoot) {
			t.judged[tier] = true
		}
	}
	t.hostPolicy, t.hostErr = fsops.ReadControl(ProcPolicyPath)
	st, err := os.Stat(sandboxplan.SandboxRoot)
	if err != nil {
		t.err = err
		return t
	}
	t.facts.TreeOwner = ownerOf(st)
	mounts, err := fsops.MountTable()
	if err != nil {
		t.err = err
		return t
	}
	for _, m := range mounts {
		if !m.ReadOnly {
			t.facts.Writers = append(t.facts.Writers, policy.TrustWriter{Dir: m.Target, Agent: a.Name})
		}
	}
	return t
}

// Trust is the trust of the caller's tree: inside a sandbox the run host's
// verdicts (see sandboxTrust), elsewhere the tree at c.Root. Outside an
// agent context it is still the tree's (a person asking about tools).
func (c Caller) Trust() *Trust {
	if c.Context.Source == policy.ContextSandbox && c.Agent != nil {
		return sandboxTrust(c.Agent)
	}
	return LoadTrust(c.Root)
}

// Tier decides whether dir, a tool directory as this process sees it, is
// a trusted tier; when not, it says why.
func (t *Trust) Tier(dir string) (bool, string) {
	v := t.tier(filepath.Clean(dir))
	return v.ok, v.reason
}

func (t *Trust) tier(dir string) tierVerdict {
	if v, ok := t.tiers[dir]; ok {
		return v
	}
	v := t.judgeTier(dir)
	t.tiers[dir] = v
	return v
}

func (t *Trust) judgeTier(dir string) tierVerdict {
	if t.judged[dir] {
		if t.hostErr != nil {
			return tierVerdict{reason: "the run host's verdicts are unreadable: " + t.hostErr.Error()}
		}
		if reason, skipped := policy.TierSkipped(t.hostPolicy, dir); skipped {
			return tierVerdict{reason: reason}
		}
		return tierVerdict{ok: true, host: true}
	}
	if t.err != nil {
		return tierVerdict{reason: "cannot examine the tree: " + t.err.Error()}
	}
	top := t.facts.Root
	if !under(dir, top) {
		top = "/"
	}
	chain, _, err := fsops.OwnerChain(top, dir)
	if err != nil {
		return tierVerdict{reason: "cannot examine " + dir + ": " + err.Error()}
	}
	ok, reason := policy.TierTrust(dir, chain, t.facts)
	return tierVerdict{ok: ok, reason: reason, chain: chain}
}

// Tool decides whether the tool at hit is trusted: its tier, its file and
// its control directory with everything in it.
func (t *Trust) Tool(hit fsops.ToolHit) (bool, string) {
	v := t.tier(filepath.Clean(hit.Dir))
	if !v.ok {
		return false, "tier " + hit.Dir + ": " + v.reason
	}
	if v.host {
		// Inside the sandbox the host bound into this tier only the
		// tools it trusted, read-only.
		return true, ""
	}
	info := hit.Info
	if info == nil {
		var err error
		if info, err = os.Lstat(hit.Path); err != nil {
			return false, "cannot examine " + hit.Path + ": " + err.Error()
		}
	}
	comps := append([]policy.FileFacts{}, v.chain...)
	comps = append(comps, *StatFacts(hit.Path, info))
	ctl, more, err := fsops.ControlTreeFacts(hit.ControlDir)
	if err != nil {
		return false, "cannot examine " + hit.ControlDir + ": " + err.Error()
	}
	if more {
		return false, fmt.Sprintf("%s holds more than %d entries", hit.ControlDir, fsops.MaxControlEntries)
	}
	return policy.TierTrust(hit.Path, append(comps, ctl...), t.facts)
}

// Skill decides whether dir, a shared skill bundle, may be shown to the
// agents that may read its space (policy.SkillTrust): its chain from the
// tree root and everything below it.
func (t *Trust) Skill(dir string) (bool, string) {
	if t.err != nil {
		return false, "cannot examine the tree: " + t.err.Error()
	}
	dir = filepath.Clean(dir)
	chain, _, err := fsops.OwnerChain(t.facts.Root, dir)
	if err != nil {
		return false, "cannot examine " + dir + ": " + err.Error()
	}
	below, more, err := fsops.ControlTreeFacts(dir)
	if err != nil {
		return false, "cannot examine " + dir + ": " + err.Error()
	}
	if more {
		return false, fmt.Sprintf("%s holds more than %d entries", dir, fsops.MaxControlEntries)
	}
	return policy.SkillTrust(dir, append(chain, below...), t.facts)
}

// SkippedTier is a tier of a tool path the trust rule set aside.
type SkippedTier struct {
	Tier   string // as the agent's path names it (/ctx/shared/proj/tool)
	Dir    string // as this process sees it
	Reason string
}

// SkippedTool is a tool in a trusted tier that the rule set aside on its
// own: a later tier's tool of that name is used instead.
type SkippedTool struct {
	Tool   string // TIER/NAME as the agent's path names it
	Hit    fsops.ToolHit
	Reason string
}

// ToolPath is a tool path after the trust rule: the usable directories,
// and for each tier it skipped, why.
type ToolPath struct {
	Dirs    []string // usable directories as this process sees them, in order
	Tiers   []string // the same, as the agent's path names them
	Skipped []SkippedTier
	Trust   *Trust
}

// Filter applies the rule to dirs (as this process sees them), named tiers
// (as the agent's path names them; the same length).
func (t *Trust) Filter(tiers, dirs []string) ToolPath {
	p := ToolPath{Trust: t}
	for i, d := range dirs {
		if ok, reason := t.Tier(d); !ok {
			p.Skipped = append(p.Skipped, SkippedTier{Tier: tiers[i], Dir: d, Reason: reason})
			continue
		}
		p.Dirs = append(p.Dirs, d)
		p.Tiers = append(p.Tiers, tiers[i])
	}
	return p
}

// TrustedToolDirs is agent a's tool path on the host after the trust rule:
// what the run host projects, what ctx policy explain and doctor report,
// what ctxmcp serve --agent serves.
func TrustedToolDirs(root fsops.Root, a *policy.Agent) ToolPath {
	return LoadTrust(root).Filter(a.Path, ToolDirs(root, a))
}

// TrustedDirs is the caller's tool path dirs (as this process sees them:
// CTX_PATH) after the trust rule.
func (c Caller) TrustedDirs(dirs []string) ToolPath {
	return c.Trust().Filter(dirs, dirs)
}

// Accept reports whether hit is a trusted tool: for fsops.LookupToolFunc
// and ListToolsFunc.
func (p ToolPath) Accept(hit fsops.ToolHit) bool {
	ok, _ := p.Trust.Tool(hit)
	return ok
}

// Lookup finds the first trusted tool named name, as CTX_PATH lookup does
// over the usable directories: a tool the rule sets aside is not found.
func (p ToolPath) Lookup(name string) (fsops.ToolHit, error) {
	return fsops.LookupToolFunc(p.Dirs, name, p.Accept)
}

// List lists the trusted tools (fsops.ListTools over the usable
// directories), and the tools set aside on their own.
func (p ToolPath) List() ([]fsops.ToolHit, []SkippedTool) {
	var skipped []SkippedTool
	hits, _ := fsops.ListToolsFunc(p.Dirs, func(hit fsops.ToolHit) bool {
		ok, reason := p.Trust.Tool(hit)
		if !ok {
			skipped = append(skipped, SkippedTool{Tool: path.Join(p.TierOf(hit.Dir), hit.Name), Hit: hit, Reason: reason})
		}
		return ok
	})
	return hits, skipped
}

// SkippedFor is what the rule set aside for tool name: the skipped tiers
// that hold an executable of that name, and the tools of that name set
// aside on their own before the first trusted one. ctx policy explain
// shows them.
func (p ToolPath) SkippedFor(name string) ([]SkippedTier, []SkippedTool) {
	if policy.ValidName(name) != nil {
		return nil, nil
	}
	var tiers []SkippedTier
	for _, s := range p.Skipped {
		if info, err := os.Lstat(filepath.Join(s.Dir, name)); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			tiers = append(tiers, s)
		}
	}
	var tools []SkippedTool
	fsops.LookupToolFunc(p.Dirs, name, func(hit fsops.ToolHit) bool {
		ok, reason := p.Trust.Tool(hit)
		if !ok {
			tools = append(tools, SkippedTool{Tool: path.Join(p.TierOf(hit.Dir), hit.Name), Hit: hit, Reason: reason})
		}
		return ok
	})
	return tiers, tools
}

// TierOf names a usable directory as the agent's path does.
func (p ToolPath) TierOf(dir string) string {
	for i, d := range p.Dirs {
		if d == dir {
			return p.Tiers[i]
		}
	}
	return dir
}

// SharedSpaces lists the shared spaces an agent may be granted: the valid
// directory names under shared/, but the manual bundle.
func SharedSpaces(root fsops.Root) []string {
	entries, _ := os.ReadDir(root.Path("shared"))
	var out []string
	for _, en := range entries {
		space := en.Name()
		if space == "cortexfs-docs" || policy.ValidName(space) != nil || !en.IsDir() {
			continue
		}
		out = append(out, space)
	}
	return out
}

// SharedGrant decides how agent a's sandbox mounts shared space `space`:
// read is true when it is mounted at all, write when read-write (both read
// and write are allowed). The space is decided with its mount in the view,
// under the agent's own mount control, which may still narrow it.
func SharedGrant(root fsops.Root, a *policy.Agent, space string) (read, write bool) {
	read = SharedDecision(root, a, space, policy.PermRead).Allowed
	write = read && SharedDecision(root, a, space, policy.PermWrite).Allowed
	return read, write
}

// SharedDecision is the full check of perm on shared space `space` for
// agent a as its sandbox would have it (the space mounted in the view, the
// agent's mount control over it): Linux permission of shared/SPACE for the
// agent's uid and groups, mount visibility, then agent policy. The
// decision names the refusing layer and why.
func SharedDecision(root fsops.Root, a *policy.Agent, space string, perm policy.Permission) policy.Decision {
	dir := root.SharedDir(space)
	facts := policy.Facts{File: FileFacts(dir)}
	obj := policy.Object{Class: policy.ClassShared, Name: space}
	base := View(root, a)
	view := policy.View{Mounts: append([]policy.Mount{base.Mounts[0],
		{Source: dir, Target: sandboxplan.SandboxRoot + "/shared/" + space}}, base.Mounts[1:]...)}
	return policy.Check(a, view, obj, perm, facts)
}

func ownerOf(info fs.FileInfo) uint32 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}

// under reports whether p is dir or below it (clean absolute paths).
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}
