package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"ctx/applets/authority"
	"ctx/fsops"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// RunSkills is what a run shows at /mnt/skills: the agent's own skills
// directory (also bound read-only over /home/agent/skills) and the bundles.
type RunSkills struct {
	Dir  string
	List []sandboxplan.Skill
}

// GatherSkills finds the skill bundles of agent a's run, each a directory
// shown read-only at /mnt/skills/NAME, and the /mnt/proc/policy lines that
// say where each came from or why one was left out:
//
//   - the agent's own, home/UID/agent/NAME/skills/NAME/. The directory is
//     made when missing, so the read-only bind over /home/agent/skills
//     always has a source: an agent that could create it would write its
//     own instructions for its next run. A skills directory that is a
//     symlink refuses the start (no bind source is ever followed).
//   - a shared space's, shared/SPACE/skills/NAME/, for every space the
//     agent may read (shared:SPACE read; ctx man agentrc). Each is shown
//     to every agent that may read the space, so only when no agent can
//     change it on any path (policy.SkillTrust: in no directory an agent
//     may write, no symlink, nothing owned by an agent's uid).
//
// The agent's own skill wins over a shared one of the same name, and
// spaces are taken in name order. Symlinked entries, files and names that
// are not object names are left out (a line says so).
func GatherSkills(root fsops.Root, a *policy.Agent, shared []sandboxplan.SharedGrant) (RunSkills, []string, error) {
	var rs RunSkills
	var lines []string
	taken := map[string]string{}
	rs.Dir = filepath.Join(root.AgentHome(int(a.UID), a.Name), "skills")
	st, err := os.Lstat(rs.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := fsops.MkdirNoFollow(rs.Dir, 0o755); err != nil {
			return rs, nil, fmt.Errorf("/mnt/skills: %s: %v", rs.Dir, err)
		}
	case err != nil:
		return rs, nil, fmt.Errorf("/mnt/skills: %v", err)
	case st.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(rs.Dir)
		return rs, nil, fmt.Errorf("/mnt/skills: %s is a symlink (to %q); ctx follows no symlink for a bind source: replace it with a directory", rs.Dir, target)
	case !st.IsDir():
		return rs, nil, fmt.Errorf("/mnt/skills: %s is not a directory", rs.Dir)
	}
	for _, en := range skillEntries(rs.Dir) {
		if why := skillEntryProblem(en); why != "" {
			lines = append(lines, fmt.Sprintf("skill:%s skipped home: %s", quoteIfOdd(en.Name()), why))
			continue
		}
		rs.List = append(rs.List, sandboxplan.Skill{Name: en.Name(), HostDir: filepath.Join(rs.Dir, en.Name())})
		taken[en.Name()] = "home"
		lines = append(lines, "skill:"+en.Name()+" granted home")
	}

	spaces := append([]sandboxplan.SharedGrant(nil), shared...)
	sort.Slice(spaces, func(i, j int) bool { return spaces[i].Space < spaces[j].Space })
	var trust *authority.Trust
	for _, g := range spaces {
		dir := filepath.Join(g.HostDir, "skills")
		from := "shared:" + g.Space
		if st, err := os.Lstat(dir); err != nil || (!st.IsDir() && st.Mode()&fs.ModeSymlink == 0) {
			continue
		}
		if trust == nil {
			trust = authority.LoadTrust(root)
		}
		for _, en := range skillEntries(dir) {
			name := en.Name()
			if why := skillEntryProblem(en); why != "" {
				lines = append(lines, fmt.Sprintf("skill:%s skipped %s: %s", quoteIfOdd(name), from, why))
				continue
			}
			if by, ok := taken[name]; ok {
				why := "the agent's own skill has that name"
				if by != "home" {
					why = by + " has a skill of that name (spaces are taken in name order)"
				}
				lines = append(lines, fmt.Sprintf("skill:%s skipped %s: %s", name, from, why))
				continue
			}
			if ok, reason := trust.Skill(filepath.Join(dir, name)); !ok {
				lines = append(lines, fmt.Sprintf("skill:%s skipped %s untrusted: %s", name, from, reason))
				continue
			}
			rs.List = append(rs.List, sandboxplan.Skill{Name: name, HostDir: filepath.Join(dir, name)})
			taken[name] = from
			lines = append(lines, "skill:"+name+" granted "+from)
		}
	}
	return rs, lines, nil
}

// skillEntries lists a skills directory, opened without following any
// symlink on the way (its entries are judged by lstat, never followed).
func skillEntries(dir string) []fs.DirEntry {
	fd, err := fsops.OpenNoSymlinks(dir)
	if err != nil {
		return nil
	}
	defer fsops.CloseFD(fd)
	d, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return nil
	}
	defer d.Close()
	entries, _ := d.ReadDir(-1)
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return entries
}

// skillEntryProblem says why a skills directory entry is no skill bundle,
// or "" when it is one.
func skillEntryProblem(en fs.DirEntry) string {
	switch {
	case strings.HasPrefix(en.Name(), "."):
		return "a dot name"
	case policy.ValidName(en.Name()) != nil:
		return "not an object name"
	case en.Type()&fs.ModeSymlink != 0:
		return "a symlink (ctx follows none for a bind source)"
	case !en.IsDir():
		return "not a directory"
	}
	return ""
}

// quoteIfOdd keeps a policy line one line of plain text whatever an entry
// is called.
func quoteIfOdd(name string) string {
	if policy.ValidName(name) == nil {
		return name
	}
	return fmt.Sprintf("%q", name)
}
