package policy

import (
	"bytes"
	"fmt"
	"strings"
)

// The protect control (agent/NAME.d/protect) lists the paths of the
// workspace that the agent may read but never write, because programs on
// the host execute or load them later on their own, without a person
// deciding to run them: git runs .git/hooks and whatever .git/config names
// (core.fsmonitor, core.hooksPath, filters, the pager), direnv runs
// .envrc, editors run the tasks and programs their workspace settings
// name, MCP clients start the servers their project config names (DESIGN
// §16 rule 11). Without the control the default list below is in force.
//
// Grammar, one entry a line:
//
//	PATH        PATH, relative to the workspace, is read-only
//	**/PATH     PATH at the top of the workspace and below every directory
//	            of it (found when the run starts)
//	!ENTRY      take the default ENTRY (exactly as listed) out of the set
//
// PATH is relative and canonical: components separated by single "/",
// none empty, "." or "..", no leading or trailing "/", no control byte,
// and no glob character (* ? [ ] are reserved; "**/" is only a prefix).
// Lines end in LF (the final one may be missing, a CR before it is
// dropped); blank lines, comments and repeats are refused. Entries add to
// the defaults: a default that the file does not name is still protected,
// and only a "!" line takes one out, so an empty or truncated file never
// silently drops a protection, and the defaults a later ctx adds apply to
// existing files too.

// ProtectPattern is one protected path pattern.
type ProtectPattern struct {
	Path     string // relative, canonical
	AnyDepth bool   // "**/": at the top and below every directory
}

func (p ProtectPattern) String() string {
	if p.AnyDepth {
		return "**/" + p.Path
	}
	return p.Path
}

// ProtectEntry is one line of the protect control.
type ProtectEntry struct {
	ProtectPattern
	Remove bool // "!": a default taken out
}

func (e ProtectEntry) String() string {
	if e.Remove {
		return "!" + e.ProtectPattern.String()
	}
	return e.ProtectPattern.String()
}

// defaultProtect is the protected set of an agent without a protect
// control, each entry a file or directory that a host program executes or
// loads by itself. The manual's list (ctx man sandbox) is kept in step by
// a test. The first group is project configuration, wherever a project
// sits in the workspace; the second is a home directory's, for a workspace
// that is one.
var defaultProtect = []ProtectPattern{
	// git: hooks and config (core.fsmonitor, core.hooksPath, aliases,
	// filter and diff drivers, the pager), run by host git; a .git file's
	// gitdir target comes with it.
	{".git", true},
	// Submodule URLs and paths that host git fetches and checks out by
	// itself (git submodule update, clone --recurse-submodules,
	// submodule.recurse).
	{".gitmodules", true},
	// Git hook managers: the hook installed in .git/hooks runs what these
	// name at every commit (husky points core.hooksPath into .husky).
	{".husky", true},
	{".pre-commit-config.yaml", true},
	{"lefthook.yml", true},
	{".lefthook.yml", true},
	// direnv: shell code run when a shell enters the directory.
	{".envrc", true},
	// Editors and IDEs: tasks run on folder open, settings naming programs
	// (interpreters, terminal environments, git.path), run configurations;
	// devcontainer.json's initializeCommand runs on the host.
	{".vscode", true},
	{".idea", true},
	{".devcontainer", true},
	// MCP clients and coding-agent CLIs: the servers they start and the
	// hooks they run (Claude Code's .claude/settings.json, Cursor's
	// .cursor/mcp.json, .mcp.json).
	{".mcp.json", true},
	{".claude", true},
	{".cursor", true},
	// A home directory as the workspace: shell startup files run by every
	// shell, ssh's config (ProxyCommand) and authorized_keys, git's user
	// config.
	{".bashrc", false},
	{".bash_profile", false},
	{".bash_login", false},
	{".bash_logout", false},
	{".profile", false},
	{".zshrc", false},
	{".zshenv", false},
	{".zprofile", false},
	{".zlogin", false},
	{".zlogout", false},
	{".ssh", false},
	{".gitconfig", false},
	{".config/git", false},
}

// DefaultProtectEntries is the default set as protect lines, what the
// reference agents ship.
func DefaultProtectEntries() []ProtectEntry {
	out := make([]ProtectEntry, len(defaultProtect))
	for i, p := range defaultProtect {
		out[i] = ProtectEntry{ProtectPattern: p}
	}
	return out
}

func isDefaultProtect(p ProtectPattern) bool {
	for _, d := range defaultProtect {
		if d == p {
			return true
		}
	}
	return false
}

// Bounds on one entry: PATH_MAX and NAME_MAX of Linux.
const (
	maxProtectPath      = 4096
	maxProtectComponent = 255
)

// ParseProtect parses the protect control. An empty file is valid and
// means the defaults, like an absent one.
func ParseProtect(data []byte) ([]ProtectEntry, error) {
	var entries []ProtectEntry
	seen := map[ProtectPattern]int{}
	err := eachLine(data, func(num int, line []byte, _ bool) error {
		e, err := parseProtectLine(num, string(line))
		if err != nil {
			return err
		}
		if first, dup := seen[e.ProtectPattern]; dup {
			return controlErr("protect", num, "path", KindDuplicate, "%s is already on line %d", quote(e.ProtectPattern.String()), first)
		}
		// PATH next to **/PATH says nothing more, and !PATH next to
		// **/PATH contradicts it: both are mistakes worth naming.
		other := ProtectPattern{Path: e.Path, AnyDepth: !e.AnyDepth}
		if first, dup := seen[other]; dup {
			return controlErr("protect", num, "path", KindDuplicate, "%s overlaps %s on line %d", quote(e.ProtectPattern.String()), quote(other.String()), first)
		}
		seen[e.ProtectPattern] = num
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

func parseProtectLine(num int, line string) (ProtectEntry, error) {
	bad := func(kind ErrorKind, format string, args ...any) error {
		return controlErr("protect", num, "path", kind, format, args...)
	}
	var e ProtectEntry
	rest := line
	if r, ok := strings.CutPrefix(rest, "!"); ok {
		e.Remove, rest = true, r
	}
	if r, ok := strings.CutPrefix(rest, "**/"); ok {
		e.AnyDepth, rest = true, r
	}
	switch {
	case line == "":
		return e, bad(KindInvalidPath, "empty line (one path a line, no blank lines)")
	case HasControlByte(line):
		return e, bad(KindInvalidPath, "%s contains a control byte", quote(line))
	case len(rest) > maxProtectPath:
		return e, bad(KindInvalidPath, "path longer than %d bytes", maxProtectPath)
	case rest == "":
		return e, bad(KindInvalidPath, "%s names no path", quote(line))
	case strings.HasPrefix(rest, "/"):
		return e, bad(KindInvalidPath, "%s is absolute: paths are relative to the workspace", quote(line))
	case strings.HasSuffix(rest, "/"):
		return e, bad(KindInvalidPath, "%s ends in /: a path protects a file or a directory alike, write it without", quote(line))
	case strings.ContainsAny(rest, "*?[]"):
		return e, bad(KindInvalidPath, "%s has a glob character: only a leading **/ is a pattern", quote(line))
	case strings.HasPrefix(rest, "!"):
		return e, bad(KindInvalidPath, "%s: a path may not start with ! (one ! takes a default out)", quote(line))
	}
	for _, c := range strings.Split(rest, "/") {
		switch {
		case c == "":
			return e, bad(KindInvalidPath, "%s has an empty component (doubled /)", quote(line))
		case c == "." || c == "..":
			return e, bad(KindInvalidPath, "%s has a %s component", quote(line), c)
		case len(c) > maxProtectComponent:
			return e, bad(KindInvalidPath, "%s has a component longer than %d bytes", quote(line), maxProtectComponent)
		}
	}
	e.Path = rest
	if e.Remove && !isDefaultProtect(e.ProtectPattern) {
		return e, bad(KindInvalidValue, "%s is not a default entry: ! takes out a default exactly as listed (ctx man sandbox); an entry that is not a default is simply left out", quote(e.ProtectPattern.String()))
	}
	return e, nil
}

// FormatProtect renders a protect control canonically.
func FormatProtect(entries []ProtectEntry) []byte {
	var b bytes.Buffer
	for _, e := range entries {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// EffectiveProtect is the set in force: the defaults, less the ones taken
// out, then the entries added, in that order, without repeats.
func EffectiveProtect(entries []ProtectEntry) []ProtectPattern {
	removed := map[ProtectPattern]bool{}
	for _, e := range entries {
		if e.Remove {
			removed[e.ProtectPattern] = true
		}
	}
	var out []ProtectPattern
	have := map[ProtectPattern]bool{}
	for _, d := range defaultProtect {
		if !removed[d] {
			out, have[d] = append(out, d), true
		}
	}
	for _, e := range entries {
		if !e.Remove && !have[e.ProtectPattern] {
			out, have[e.ProtectPattern] = append(out, e.ProtectPattern), true
		}
	}
	return out
}

// ProtectCovers reports whether set protects p wherever p protects: the
// same pattern, or the any-depth form of a top-level one.
func ProtectCovers(set []ProtectPattern, p ProtectPattern) bool {
	for _, s := range set {
		if s.Path == p.Path && (s.AnyDepth || !p.AnyDepth) {
			return true
		}
	}
	return false
}

// ---- .git files ----

// maxGitFile bounds a .git file, a worktree's gitdir file or a commondir
// file: one path and a newline.
const maxGitFile = 4096 + 16

// ParseGitFile parses a .git file (a linked worktree's or a submodule's):
// "gitdir: PATH", then optional CR and LF, as git reads it. PATH is
// returned as written; relative means relative to the .git file's
// directory.
func ParseGitFile(data []byte) (string, error) {
	rest, ok := bytes.CutPrefix(data, []byte("gitdir: "))
	if !ok {
		return "", fmt.Errorf(`does not start with "gitdir: "`)
	}
	return gitPathLine(rest)
}

// ParseGitPathFile parses a one-path file of a git directory (a
// worktree's gitdir back-link, a commondir file).
func ParseGitPathFile(data []byte) (string, error) { return gitPathLine(data) }

func gitPathLine(b []byte) (string, error) {
	if len(b) > maxGitFile {
		return "", fmt.Errorf("longer than %d bytes", maxGitFile)
	}
	b = bytes.TrimRight(b, "\r\n")
	switch {
	case len(b) == 0:
		return "", fmt.Errorf("names no path")
	case bytes.ContainsAny(b, "\x00\r\n"):
		return "", fmt.Errorf("holds more than one line")
	}
	return string(b), nil
}

// ---- the end of a run: what is compared, where it goes ----

// gitWatched are the entries of a git directory that git loads or runs
// by itself, compared at the end of a run: its config (core.fsmonitor,
// core.hooksPath, aliases, filters), a worktree's config and the
// commondir file that says where the config is. Objects, refs, the index
// and the logs are left alone: git does not execute them.
var gitWatched = []string{"config", "config.worktree", "commondir"}

// GitWatched returns the entries of a git directory compared at the end
// of a run, besides its hooks.
func GitWatched() []string { return append([]string(nil), gitWatched...) }

// GitHookWatched reports whether an entry of a git directory's hooks
// directory is compared: every one but git init's samples, which git
// never runs under their own name.
func GitHookWatched(name string) bool { return !strings.HasSuffix(name, ".sample") }

// GitSubDirs are the directories of a git directory that hold further
// git directories (submodules' and linked worktrees'), with config and
// hooks of their own.
func GitSubDirs() []string { return []string{"modules", "worktrees"} }

// QuarantineSuffix is what the end of run RUNID appends to a protected
// path it moves aside: no host tool loads the path under that name, and
// the run's id says which run left it.
func QuarantineSuffix(runID string) string { return ".ctx-quarantine-" + runID }
