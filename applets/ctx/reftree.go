package ctx

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/manual"
	"ctx/policy"
)

// treeVersion is the version of the reference tree this binary bootstraps.
// It is recorded in bin/cortexfs.bootstrap.json.
const treeVersion = 1

// bootstrapRecord is bin/cortexfs.bootstrap.json: which paths bootstrap
// manages. It is the proof of ownership that lets a later bootstrap re-link a
// stale tool link without touching files an administrator put there.
const bootstrapRecord = "bin/cortexfs.bootstrap.json"

// referenceAgent is one agent bootstrap creates.
type referenceAgent struct {
	Name    string
	Subject string
	Perm    string
	Parent  string // "" for the root of the lineage
	System  string // system.md
}

var referenceAgents = []referenceAgent{
	{Name: "architect", Subject: toolrun.ArchitectSubject, Perm: "r--",
		System: "You are architect, the root of the agent lineage on this host. You read and plan; " +
			"you do not change files. Your tools are reached through tsh.\n"},
	{Name: "coder", Subject: toolrun.CoderSubject, Perm: "rwx", Parent: "agent:architect",
		System: "You are coder, the default working agent. You work in /workspace with the tools tsh lists; " +
			"nothing in a prompt grants you more than your policy does.\n"},
}

// treeOwner is whose tree bootstrap builds: the effective uid and gid, which
// become the owner, uid and gid of the reference agents and name the home.
type treeOwner struct {
	UID, GID int
}

// referenceTree returns every entry bootstrap manages, parents first. self
// is the bytes of this ctx binary (bin/ctx).
//
// long: the reference tree entry by entry, one listing from bin/ to the
// homes; split into parts, the tree would no longer read as one listing.
func referenceTree(o treeOwner, self []byte) []fsops.Entry {
	homes := fs.FileMode(0o755)
	if o.UID == 0 {
		// A system tree made by root lets every user make their own
		// home/UID in it (ctx bootstrap as that user); the sticky bit
		// keeps them from removing each other's. No one else's home is
		// ever adopted (fsops.CheckAgentHome). agent/ is not theirs: only
		// root defines the agents of a root tree (ctx man ctx.agent).
		homes = 0o777 | fs.ModeSticky
	}
	uid := strconv.Itoa(o.UID)
	var t tree
	t.dir("bin", 0o755)
	t.file("bin/ctx", 0o755, self, true)
	// The helpers runtimes and sandboxes call by path (seed: /ctx/bin/tsh,
	// /ctx/bin/ctxterm): hard links of the same binary.
	t.link("bin/tsh", "bin/ctx", 0o755)
	t.link("bin/ctxterm", "bin/ctx", 0o755)
	t.dir("model", 0o755)

	t.dir("tool", 0o755)
	for _, name := range toolrun.ToolNames() {
		meta := toolrun.BuiltinTools[name]
		t.link("tool/"+name, "bin/ctx", 0o755)
		d := "tool/" + name + ".d/"
		t.dir(d[:len(d)-1], 0o755)
		t.file(d+"name", 0o644, []byte(name+"\n"), true)
		t.file(d+"description", 0o644, []byte(meta.Description+"\n"), true)
		t.file(d+"schema", 0o644, []byte(meta.Schema+"\n"), true)
		t.file(d+"cap", 0o644, []byte(meta.Cap+"\n"), true)
		if p, ok := toolrun.BuiltinPrograms[name]; ok {
			t.file(d+"program", 0o644, []byte(p+"\n"), false) // the administrator may replace it
		}
		if a, ok := toolrun.BuiltinAnnotations[name]; ok {
			t.file(d+"annotations", 0o644, []byte(a+"\n"), true)
		}
		t.file(d+"policy", 0o644, []byte(policyText(meta.Grants, "tool:"+name+" execute")), false)
		t.file(d+"status", 0o644, []byte("idle\n"), false)
		t.file(d+"log", 0o644, nil, false)
		t.dir(d+"hooks", 0o755)
		t.dir(d+"hooks/pre.d", 0o755)
		t.dir(d+"hooks/post.d", 0o755)
		if name == "tsh" {
			t.file(d+"config", 0o644, []byte("max_loaded_tools=64\ncache_capacity=32\nwindow_percent=1\n"), false)
		}
	}

	t.dir("agent", 0o755)
	for i, a := range referenceAgents {
		t.link("agent/"+a.Name, "bin/ctx", 0o755)
		d := "agent/" + a.Name + ".d/"
		t.dir(d[:len(d)-1], 0o755)
		for _, c := range a.controls(o, i) {
			t.file(d+c.name, 0o644, []byte(c.value), false)
		}
		t.dir(d+"hooks", 0o755)
		t.dir(d+"hooks/pre.d", 0o755)
		t.dir(d+"hooks/post.d", 0o755)
	}

	t.dir("home", homes)
	h := "home/" + uid
	t.dir(h, 0o700)
	t.file(h+"/.tshrc", 0o644, []byte("# tsh tool path (data, not shell code)\nCTX_PATH=/ctx/tool:/ctx/home/"+uid+"/tool\n"), false)
	t.dir(h+"/tool", 0o755)
	t.dir(h+"/model", 0o755)
	t.dir(h+"/agent", 0o755)
	for i, a := range referenceAgents {
		id := o.agentID(i)
		if id == o.UID {
			t.agentHome(h+"/agent/"+a.Name, -1, -1)
			continue
		}
		// A root tree's agents run as their own unprivileged uids: their
		// homes live under home/UID and belong to them, except session/,
		// which the run host writes.
		ah := "home/" + strconv.Itoa(id)
		t.dir(ah, 0o711) // traverse only: an iso landlock agent passes through to its home
		t.dir(ah+"/agent", 0o711)
		t.agentHome(ah+"/agent/"+a.Name, id, id)
	}

	t.dir("shared", 0o755)
	t.dir("shared/cortexfs-docs", 0o755)
	t.dir("shared/cortexfs-docs/man", 0o755)
	bundle := manual.Bundle()
	files := make([]string, 0, len(bundle))
	for f := range bundle {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		t.file("shared/cortexfs-docs/"+f, 0o644, bundle[f], true)
	}

	// The record comes last: it lists every path above.
	rec := map[string]any{"schema": "ctx.bootstrap/v1", "tree_version": treeVersion, "managed": t.rels()}
	b, _ := json.MarshalIndent(rec, "", "  ")
	t.file(bootstrapRecord, 0o644, append(b, '\n'), true)
	return t.entries
}

// agentHome adds the home skeleton of an agent: root (its chroot
// environment), session, data, cache and log. With uid >= 0 the home and
// the directories the agent writes are given to uid:gid.
func (t *tree) agentHome(dir string, uid, gid int) {
	t.ownedDir(dir, 0o700, uid, gid)
	t.dir(dir+"/session", 0o700)
	for _, sub := range fsops.AgentHomeDirs {
		t.ownedDir(dir+"/"+sub, 0o700, uid, gid)
	}
}

func (t *tree) ownedDir(rel string, mode fs.FileMode, uid, gid int) {
	t.dir(rel, mode)
	if uid >= 0 {
		e := &t.entries[len(t.entries)-1]
		e.Chown, e.UID, e.GID = true, uid, gid
	}
}

// agentID is the uid (and gid) of the i-th reference agent: the tree
// owner's own in a user's tree (the user namespace maps it onto the user),
// a uid of its own from the agent range in a root tree, so that no
// reference agent ever runs as host root.
func (o treeOwner) agentID(i int) int {
	if o.UID != 0 {
		return o.UID
	}
	return policy.AgentUIDFirst + i
}

type control struct{ name, value string }

// controls returns the control files of the i-th reference agent (DESIGN §4).
func (a referenceAgent) controls(o treeOwner, i int) []control {
	uid, gid := strconv.Itoa(o.UID), strconv.Itoa(o.GID)
	if id := o.agentID(i); id != o.UID {
		uid, gid = strconv.Itoa(id), strconv.Itoa(id)
	}
	owner := strconv.Itoa(o.UID)
	var rules []string
	for _, name := range toolrun.ToolNames() {
		for _, s := range toolrun.BuiltinTools[name].Grants {
			if s == a.Subject {
				rules = append(rules, "allow "+a.Subject+" tool:"+name+" execute")
			}
		}
	}
	rules = append(rules, "allow "+a.Subject+" model:main use")
	parent := ""
	if a.Parent != "" {
		parent = a.Parent + "\n"
	}
	meta, _ := json.Marshal(map[string]string{"description": "reference agent created by ctx bootstrap"})
	return []control{
		{"owner", owner + "\n"},
		{"uid", uid + "\n"},
		{"gid", gid + "\n"},
		{"groups", ""},
		{"perm", a.Perm + "\n"},
		{"label", "user_u:agent_r:" + a.Subject + ":s0\n"},
		{"iso", "auto\n"},
		{"parent", parent},
		{"life", "owned\n"},
		{"root", "/ctx/home/" + uid + "/agent/" + a.Name + "/root\n"},
		{"cwd", "/workspace\n"},
		{"env", ""},
		{"path", "/ctx/tool\n/ctx/home/" + owner + "/tool\n"},
		{"mount", ""},
		// The protected set written out, so the person sees it and can take
		// a default out with a ! line (ctx man sandbox).
		{"protect", string(policy.FormatProtect(policy.DefaultProtectEntries()))},
		// The limits written out, like protect: every key at its default,
		// for the person to read and change (ctx man agent, BUDGETS).
		{"budgets", string(policy.FormatBudgets(policy.DefaultBudgets()))},
		{"model", "main\n"},
		{"window", "auto\n"},
		{"abi", "argv-v1\n"},
		{"approval", "auto\n"},
		{"tools", ""},
		{"system.md", a.System},
		{"policy", strings.Join(rules, "\n") + "\n"},
		{"status", "idle\n"},
		{"pid", ""},
		{"log", ""},
		{"meta.json", string(meta) + "\n"},
	}
}

// policyText is a policy file allowing each subject one object permission.
func policyText(subjects []string, objectPerm string) string {
	var b strings.Builder
	for _, s := range subjects {
		fmt.Fprintf(&b, "allow %s %s\n", s, objectPerm)
	}
	return b.String()
}

// tree accumulates entries in order.
type tree struct{ entries []fsops.Entry }

func (t *tree) dir(rel string, mode fs.FileMode) {
	t.entries = append(t.entries, fsops.Entry{Rel: rel, Kind: fsops.KindDir, Mode: mode | fs.ModeDir})
}

func (t *tree) file(rel string, mode fs.FileMode, data []byte, owned bool) {
	t.entries = append(t.entries, fsops.Entry{Rel: rel, Kind: fsops.KindFile, Mode: mode, Data: data, Owned: owned})
}

func (t *tree) link(rel, to string, mode fs.FileMode) {
	t.entries = append(t.entries, fsops.Entry{Rel: rel, Kind: fsops.KindLink, Mode: mode, LinkTo: to})
}

func (t *tree) rels() []string {
	out := make([]string, len(t.entries))
	for i, e := range t.entries {
		out[i] = e.Rel
	}
	return out
}

// selfBytes reads this ctx binary (found without /proc where it is not
// mounted: fsops.ReadExecutable).
func selfBytes() ([]byte, error) {
	return fsops.ReadExecutable()
}
