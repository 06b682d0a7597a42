package sandboxplan

import "ctx/policy"

// What BuildPlan and BuildLandlockPlan are given: the agent and what
// the host found for it.

// HostDir is a host system directory as the plan found it: a real
// directory to bind read-only, or a symlink (merged /usr) to recreate.
type HostDir struct {
	Path    string
	Symlink string // the link's target when Path is a symlink
}

// HostEtc is one of HostEtcNames as the host has it: a symlink to
// recreate, a file or directory to bind read-only, or (Data) bytes to copy.
type HostEtc struct {
	Name    string // relative to /etc
	Symlink string // the link's target when /etc/Name is a symlink
	Data    []byte // contents to write instead of a bind (resolv.conf)
	Dir     bool   // a directory, bound read-only with its submounts
}

// HostEtcNames are the host /etc entries a synthesized /etc takes over,
// each only when the host has it: the dynamic loader's cache, CA
// certificates, time zone, the Debian alternatives links that /usr/bin
// points into, and protocol tables. Everything else of the host's /etc
// (shadow, sudoers, ssh keys, profiles...) stays out; more comes only
// through the agent's mount control. resolv.conf is copied, and only when
// the network is granted.
var HostEtcNames = []string{
	"alternatives", "ca-certificates", "ca-certificates.conf", "gai.conf", "host.conf",
	"ld.so.cache", "localtime", "mime.types", "os-release", "pki", "protocols",
	"resolv.conf", "services", "ssl", "timezone",
}

// ProjectedTool is a tool the agent may execute, as the host found it.
type ProjectedTool struct {
	Name       string
	Tier       string // the CTX_PATH directory inside the sandbox (/ctx/tool)
	HostPath   string // the executable on the host
	HostDotD   string // its control directory on the host
	Schema     []byte // the toolspec: /mnt/tools/NAME.toolspec.json (and /mnt/mcp/S/T.toolspec.json)
	MCPServer  string // the MCP server of a projected tool, else ""
	MCPTool    string
	HostTierIn string // the host tier directory (for shared tiers: under a shared mount)
	// SelfSpec is the toolspec a tool without a schema control gave of
	// itself (its --agentrc-schema, else its sibling NAME.toolspec.json),
	// validated; nil when it gave none.
	SelfSpec []byte
}

// Skill is a skill bundle shown read-only at /mnt/skills/NAME: a directory
// of the agent's own skills, or of a shared space's the agent may read.
type Skill struct {
	Name    string
	HostDir string
}

// SharedGrant is a shared space the agent may read or write.
type SharedGrant struct {
	Space   string
	HostDir string
	Write   bool
}

// PlanInput is everything BuildPlan needs, gathered by the caller: the
// agent, the run, and facts about the host. BuildPlan reads nothing itself.
type PlanInput struct {
	Agent     *policy.Agent
	Iso       string // the effective isolation: userns or uid
	CallerUID uint32
	CallerGID uint32

	RootDir string // the ctx root on the host
	NewRoot string // host directory the new root is mounted on
	RootFS  bool   // NewRoot holds the agent's own root filesystem
	// Template marks the ops a kept template may hold (template.go).
	Template   bool
	SystemDirs []HostDir
	Etc        []HostEtc // the host's entries of HostEtcNames that exist
	Workspace  string    // host directory shown at /workspace (the caller's cwd)
	// WorkspaceIDMap, in uid mode, is the workspace's on-disk owner, shown
	// to the agent as itself through an idmapped mount; nil binds as is.
	WorkspaceIDMap *IDMap
	Protect        *WorkspaceProtect
	AgentHome      string         // home/UID/agent/NAME on the host
	Extra          []policy.Mount // --mount entries of this start
	Tools          []ProjectedTool
	Shared         []SharedGrant
	ProcDir        string // host directory shown read-only at /mnt/proc
	SkillsDir      string // home/UID/agent/NAME/skills, bound read-only over /home/agent/skills, or ""
	SOP            []byte // /mnt/SOP
	Network        bool   // network:default connect is granted
	// Egress, without Network, is the run's way out through the run
	// host's egress proxy (NamespaceEgress; in iso landlock its
	// ConnectPort); nil: no network at all.
	Egress *Egress
	// Skills are the bundles shown at /mnt/skills/NAME, each read-only.
	Skills []Skill
	// Budgets are the run's limits; Cgroup says the run's cgroup holds
	// memory_bytes and pids (then no per-process data or process limit is
	// set: the cgroup counts the run as a whole, and reports each refusal).
	Budgets policy.Budgets
	Cgroup  bool
	// HostTiers are the agent's tool tiers on the host (iso landlock,
	// where CTX_PATH names them).
	HostTiers []string
	// HomeTop, in iso landlock, lets the agent write its home's top
	// (LandlockHomeTop); nil keeps it read-only but for HomeWritableDirs.
	HomeTop *HomeTop

	Cwd  string // inside; default /workspace
	Env  []string
	Argv []string
	Exe  string
}

// MntToolSpecPath is where a run shows the toolspec of tool name, and
// ok is true only inside a run's sandbox (its /mnt/proc/identity is
// there): a host path /mnt/tools means nothing of the kind.
func MntToolSpecPath(name string, exists func(string) bool) (string, bool) {
	if policy.ValidName(name) != nil || !exists(policy.IdentityPath) {
		return "", false
	}
	return SandboxMnt + "/tools/" + name + ".toolspec.json", true
}
