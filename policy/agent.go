package policy

import (
	"fmt"
	"reflect"
	"strconv"
)

// Agent is an agent definition parsed from the control files of
// agent/NAME.d/. Optional controls that were absent hold their defaults, so
// every field is the effective value.
type Agent struct {
	Name     string
	Label    string   // label control
	Subject  string   // policy subject derived from Label
	Ceiling  Ceiling  // perm control
	Owner    uint32   // owner control; default UID
	UID      uint32   // uid control
	GID      uint32   // gid control
	Groups   []uint32 // groups control; default none
	Iso      Iso      // iso control; default IsoUnset (see Isolation)
	Life     Life     // life control; default owned
	Parent   Parent   // parent control; default top-level (zero Parent)
	Env      []EnvVar // env control; default none
	Path     []string // path control; default DefaultToolPath(UID)
	Tools    []string // tools control; default none
	Window   Window   // window control; default auto
	Approval Approval // approval control; default auto
	ABI      ABI      // abi control; default argv-v1
	Model    string   // model control; default "" (no model)
	Mounts   []Mount  // mount control; default none
	Root     string   // root control: a host directory holding the agent's own root filesystem; default "" (a fresh tmpfs)
	Cwd      string   // cwd control: the working directory inside the sandbox; default "" (the sandbox's /workspace)
	Budgets  Budgets  // budgets control; default DefaultBudgets()
	Policy   *Policy  // policy control
	// Protect is the protect control's lines; nil when absent (then, as
	// for an empty file, EffectiveProtect gives the defaults).
	Protect []ProtectEntry
}

// AgentControlNames lists every control file ParseAgent understands, in the
// order it parses (and reports) them. Callers read exactly these from
// agent/NAME.d/ (fsops.ReadControls) and pass the result to ParseAgent.
var AgentControlNames = []string{
	"label", "perm", "uid", "gid", "policy", // required
	"owner", "groups", "iso", "life", "parent", "env", "path", "tools",
	"window", "approval", "abi", "model", "mount", "root", "cwd", "budgets",
	"protect",
}

// RequiredControls are the controls an agent cannot be defined without:
// who it is (label), its ceiling (perm), its Linux identity (uid, gid) and
// its authority (policy; an empty policy file is valid and grants nothing).
var RequiredControls = []string{"label", "perm", "uid", "gid", "policy"}

// DefaultToolPath is the tool path of an agent without a path control:
// the system tier and its user's tier, as the sandbox shows them.
func DefaultToolPath(uid uint32) []string {
	return []string{"/ctx/tool", "/ctx/home/" + strconv.FormatUint(uint64(uid), 10) + "/tool"}
}

// ParseAgent builds an Agent from the raw bytes of its control files, keyed
// by file name. Files not in AgentControlNames are ignored; a missing
// required control or the first malformed control (in AgentControlNames
// order) is a *ControlError.
//
// long: one case per agent control, in one switch, so that every control is
// parsed by its one grammar in one place.
func ParseAgent(name string, controls map[string][]byte) (*Agent, error) {
	if err := ValidName(name); err != nil {
		return nil, &ControlError{Control: "agent", Field: "name", Kind: KindInvalidName, Reason: "agent name " + quote(name) + ": " + nameReason(err)}
	}
	for _, c := range RequiredControls {
		if _, ok := controls[c]; !ok {
			return nil, &ControlError{Control: c, Kind: KindMissing, Reason: "required control is missing"}
		}
	}
	a := &Agent{
		Name:     name,
		Life:     LifeOwned,
		Window:   Window{Auto: true},
		Approval: ApprovalAuto,
		ABI:      ABIArgv,
	}
	ownerGiven, pathGiven := false, false
	for _, c := range AgentControlNames {
		data, ok := controls[c]
		if !ok {
			continue
		}
		var err error
		switch c {
		case "label":
			a.Label, a.Subject, err = ParseLabel(data)
		case "perm":
			a.Ceiling, err = ParseCeiling(data)
		case "uid", "gid", "owner":
			var id uint32
			id, err = ParseID(c, data)
			switch c {
			case "uid":
				a.UID = id
			case "gid":
				a.GID = id
			default:
				a.Owner, ownerGiven = id, true
			}
		case "policy":
			a.Policy, err = ParsePolicy(data)
		case "groups":
			a.Groups, err = ParseGroups(data)
		case "iso":
			a.Iso, err = ParseIso(data)
		case "life":
			a.Life, err = ParseLife(data)
		case "parent":
			a.Parent, err = ParseParent(data)
		case "env":
			a.Env, err = ParseEnv(data)
		case "path":
			a.Path, err = ParsePath(data)
			pathGiven = true
		case "tools":
			a.Tools, err = ParseTools(data)
		case "window":
			a.Window, err = ParseWindow(data)
		case "approval":
			a.Approval, err = ParseApproval(data)
		case "abi":
			a.ABI, err = ParseABI(data)
		case "model":
			a.Model, err = ParseModel(data)
		case "mount":
			a.Mounts, err = ParseMounts(data)
		case "root":
			a.Root, err = ParsePathControl(c, data)
		case "cwd":
			a.Cwd, err = ParsePathControl(c, data)
		case "budgets":
			a.Budgets, err = ParseBudgets(data)
		case "protect":
			a.Protect, err = ParseProtect(data)
		}
		if err != nil {
			return nil, err
		}
	}
	if a.Budgets == nil {
		a.Budgets = DefaultBudgets()
	}
	if !ownerGiven {
		a.Owner = a.UID
	}
	if !pathGiven {
		a.Path = DefaultToolPath(a.UID)
	}
	return a, nil
}

// Controls renders the agent back into control files, every control in
// canonical form (defaults written out), except iso when unset, model,
// root and cwd when empty and parent for a top-level agent, which are left
// absent. ParseAgent of the result gives an
// equal Agent.
func (a *Agent) Controls() map[string][]byte {
	line := func(s string) []byte { return []byte(s + "\n") }
	id := func(n uint32) []byte { return line(strconv.FormatUint(uint64(n), 10)) }
	c := map[string][]byte{
		"label":    line(a.Label),
		"perm":     line(a.Ceiling.String()),
		"uid":      id(a.UID),
		"gid":      id(a.GID),
		"policy":   a.Policy.Format(),
		"owner":    id(a.Owner),
		"groups":   FormatGroups(a.Groups),
		"life":     line(string(a.Life)),
		"env":      FormatEnv(a.Env),
		"path":     FormatLines(a.Path),
		"tools":    FormatLines(a.Tools),
		"window":   line(a.Window.String()),
		"approval": line(string(a.Approval)),
		"abi":      line(string(a.ABI)),
		"mount":    FormatMounts(a.Mounts),
	}
	if p := a.Parent.String(); p != "" {
		c["parent"] = line(p)
	}
	if a.Iso != IsoUnset {
		c["iso"] = line(string(a.Iso))
	}
	if a.Model != "" {
		c["model"] = line(a.Model)
	}
	if a.Root != "" {
		c["root"] = line(a.Root)
	}
	if a.Cwd != "" {
		c["cwd"] = line(a.Cwd)
	}
	if a.Budgets != nil && !reflect.DeepEqual(a.Budgets, DefaultBudgets()) {
		c["budgets"] = FormatBudgets(a.Budgets)
	}
	if a.Protect != nil {
		c["protect"] = FormatProtect(a.Protect)
	}
	return c
}

// Isolation returns the isolation the agent asks for: its iso control, or
// auto without one (ChooseIso turns auto into a mode).
func (a *Agent) Isolation(callerUID uint32) Iso {
	if a.Iso != IsoUnset {
		return a.Iso
	}
	return IsoAuto
}

// The uids a root tree gives its agents (bootstrap's reference agents and
// ctx agent new without --parent): above the range distributions give
// people (1000-59999) and below systemd's dynamic users (61184-65519), so an
// agent is never root and never a person. Each agent gets its own.
const (
	AgentUIDFirst = 60100
	AgentUIDLast  = 60999
)

// FreeAgentUID returns the first uid of the agent range that no agent in
// used has.
func FreeAgentUID(used []uint32) (uint32, bool) {
	taken := map[uint32]bool{}
	for _, u := range used {
		taken[u] = true
	}
	for u := uint32(AgentUIDFirst); u <= AgentUIDLast; u++ {
		if !taken[u] {
			return u, true
		}
	}
	return 0, false
}

// RunsAsHostRoot reports whether a run of the agent started by callerUID
// would hold host uid 0: only a root caller can give that away (a user's
// namespace maps the agent onto the user), either to an agent whose uid is 0
// or to an iso shared agent, which runs as the caller.
func (a *Agent) RunsAsHostRoot(callerUID uint32) bool {
	return callerUID == 0 && (a.UID == 0 || a.Isolation(callerUID) == IsoShared)
}

// HostIsolation is what this host lets the caller build, as the run host
// probed it: a user namespace with a mount namespace in it, a mount
// namespace (root), whether / is a mount point (pivot_root needs one; in a
// chroot it is not), and the Landlock ABI. The Why fields say why not.
type HostIsolation struct {
	Userns      bool
	UsernsWhy   string
	MountNS     bool
	MountNSWhy  string
	RootIsMount bool
	Landlock    int
	LandlockWhy string
}

// ChooseIso turns the requested isolation into the mode this run gets,
// or an error naming why the request cannot be met here and what would.
// auto takes the strongest that works: userns (a user) or uid (root),
// then landlock; never shared, which is only ever an explicit choice.
func ChooseIso(req Iso, callerUID uint32, h HostIsolation) (Iso, error) {
	namespaces := func() (Iso, string) {
		// Root without a mount root (a chroot) still gets a mount
		// namespace: the sandbox moves its new root over / and chroots
		// into it where pivot_root is refused. A user's namespace is
		// refused by the kernel in a chroot anyway.
		if !h.RootIsMount && callerUID != 0 {
			return "", "/ is not a mount point here (a chroot?), so no new root can be pivoted into"
		}
		if callerUID == 0 {
			if !h.MountNS {
				return "", "mount namespaces are refused: " + h.MountNSWhy
			}
			// Root runs even a userns agent with real ids: a namespace
			// made by root would map the agent onto host root.
			return IsoUID, ""
		}
		if !h.Userns {
			return "", "user namespaces are not available: " + h.UsernsWhy
		}
		return IsoUserns, ""
	}
	landlock := func() (Iso, string) {
		if h.Landlock <= 0 {
			return "", "Landlock is not available: " + h.LandlockWhy
		}
		return IsoLandlock, ""
	}
	switch req {
	case IsoShared:
		return IsoShared, nil
	case IsoUID:
		if callerUID != 0 {
			return "", fmt.Errorf("iso uid switches to the agent's uid and needs root; use iso userns or auto")
		}
		fallthrough
	case IsoUserns:
		if iso, why := namespaces(); iso != "" {
			return iso, nil
		} else {
			return "", fmt.Errorf("iso %s: %s; use iso landlock (or auto), or run outside the chroot or container", req, why)
		}
	case IsoLandlock:
		if iso, why := landlock(); iso != "" {
			return iso, nil
		} else {
			return "", fmt.Errorf("iso landlock: %s; use a kernel with Landlock (5.13+, lsm=landlock), or iso userns/uid", why)
		}
	default: // auto
		nsIso, nsWhy := namespaces()
		if nsIso != "" {
			return nsIso, nil
		}
		llIso, llWhy := landlock()
		if llIso != "" {
			return llIso, nil
		}
		return "", fmt.Errorf("no isolation works here: %s; %s. iso shared runs the agent without any, and only when asked for by name", nsWhy, llWhy)
	}
}

// inGroup reports whether gid is the agent's primary or a supplementary group.
func (a *Agent) inGroup(gid uint32) bool {
	if gid == a.GID {
		return true
	}
	for _, g := range a.Groups {
		if g == gid {
			return true
		}
	}
	return false
}
