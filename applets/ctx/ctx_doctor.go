package ctx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/fsops/queue"
	"ctx/fsops/sandbox"
	"ctx/policy"
)

// rootEntries are the only names allowed at the top of the tree.
var rootEntries = map[string]bool{
	"bin": true, "model": true, "agent": true, "tool": true, "home": true, "shared": true, "status": true,
	fsops.SecretDirName: true,
}

// RunDoctor is `ctx doctor [--root DIR] [-v|-q]`: a summary of the tree,
// the host and which agents can start, then only the problems, each with
// its fix (-v: every check; -q: the problem lines only); exit 1 if any
// check fails, and nothing written.
func RunDoctor(e *cli.Env, args []string) int {
	var rootFlag string
	var quiet, verbose bool
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.Bool("q", &quiet)
	f.Bool("quiet", &quiet)
	f.Bool("v", &verbose)
	f.Bool("verbose", &verbose)
	if _, code, ok := cli.ParseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	if quiet && verbose {
		return cli.UsageError(e, "-q and -v exclude each other")
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	if st, err := os.Stat(root.Dir); err != nil || !st.IsDir() {
		fmt.Fprintf(e.Stdout, "missing %s: no ctx tree here\n", root.Dir)
		if !quiet {
			fmt.Fprintf(e.Stdout, "  fix: ctx bootstrap --root %s\n", shellQuote(root.Dir))
		}
		return cli.Failure
	}
	self, err := selfBytes()
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "cannot read own executable: %v", err)
	}
	entries := referenceTree(treeOwner{UID: os.Geteuid(), GID: os.Getegid()}, self)
	findings := root.Inspect(entries)
	findings = append(findings, checkControls(root)...)
	findings = append(findings, checkHooks(root)...)
	findings = append(findings, checkRootEntries(root)...)
	findings = append(findings, checkToolTrust(root)...)
	findings = append(findings, checkShadows(root)...)
	findings = append(findings, checkHostRoot(root)...)
	findings = append(findings, checkSharedSpaces(root)...)
	fixes := map[fsops.Finding]string{}
	host := sandbox.ProbeHost()
	starts, agents := checkAgentStarts(root, host, fixes)
	findings = append(findings, starts...)
	findings = append(findings, checkGrantedRefused(root, fixes)...)
	findings = append(findings, checkSecrets(root, fixes)...)
	return printDoctor(e.Stdout, root, findings, fixes, host, agents, verbose, quiet)
}

// checkRootEntries reports names at the top of the tree that are not part
// of the root ABI (the root is frozen: no mcp/, audit/, memory/ ...).
func checkRootEntries(root fsops.Root) []fsops.Finding {
	entries, err := os.ReadDir(root.Dir)
	if err != nil {
		return []fsops.Finding{{Status: "invalid", Rel: ".", Detail: err.Error()}}
	}
	var out []fsops.Finding
	for _, en := range entries {
		if !rootEntries[en.Name()] {
			out = append(out, fsops.Finding{Status: "unexpected", Rel: en.Name(), Detail: "not a root ABI entry (bin model agent tool home shared status secret)"})
		}
	}
	return out
}

// checkHooks reports hook files that would be skipped at run time: symlinks
// and files without an execute bit.
func checkHooks(root fsops.Root) []fsops.Finding {
	var out []fsops.Finding
	for _, class := range []string{"tool", "agent"} {
		dirs, _ := filepath.Glob(filepath.Join(root.Dir, class, "*.d", "hooks", "*.d"))
		sort.Strings(dirs)
		for _, d := range dirs {
			hooks, _ := os.ReadDir(d)
			for _, h := range hooks {
				info, err := h.Info()
				if err != nil {
					continue
				}
				rel := root.RelPath(filepath.Join(d, h.Name()))
				switch {
				case info.Mode()&os.ModeSymlink != 0:
					out = append(out, fsops.Finding{Status: "invalid", Rel: rel, Detail: "hook is a symlink; it is skipped"})
				case !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0:
					out = append(out, fsops.Finding{Status: "invalid", Rel: rel, Detail: "hook is not an executable regular file; it is skipped"})
				}
			}
		}
	}
	return out
}

// checkToolTrust reports, for every agent, each tier of its tool path and
// each tool in a usable tier that the tool-trust rule sets aside (DESIGN
// §16 rule 8): its tools are no candidates for that agent, exactly as if
// absent. The detail is the line its runs show in /mnt/proc/policy.
func checkToolTrust(root fsops.Root) []fsops.Finding {
	entries, _ := os.ReadDir(root.AgentDir())
	trust := authority.LoadTrust(root)
	var out []fsops.Finding
	for _, en := range entries {
		name, ok := strings.CutSuffix(en.Name(), ".d")
		if !ok || policy.ValidName(name) != nil {
			continue
		}
		a, err := authority.LoadAgent(root, name)
		if err != nil {
			continue // reported by checkControls
		}
		rel := "agent/" + name + ".d/path"
		tp := trust.Filter(a.Path, authority.ToolDirs(root, a))
		for _, s := range tp.Skipped {
			out = append(out, fsops.Finding{Status: "unexpected", Rel: rel, Detail: cli.Escape(policy.TierSkipLine(s.Tier, s.Reason))})
		}
		_, tools := tp.List()
		for _, s := range tools {
			out = append(out, fsops.Finding{Status: "unexpected", Rel: rel, Detail: cli.Escape(policy.ToolSkipLine(s.Tool, s.Reason))})
		}
	}
	return out
}

// checkShadows reports tools that shadow a builtin tool: one in another
// tier (the caller's home tier, a shared space's) named exactly like a
// builtin, which wins for every CTX_PATH that lists its tier first, and an
// MCP-projected tool whose server is named like a builtin group (fs,
// shell, tsh, agent: ctxmcp project refuses those now; an older projection
// may remain), whose SERVER.TOOL sits among the builtins. The system
// tier's own builtins are the managed paths checked above.
func checkShadows(root fsops.Root) []fsops.Finding {
	builtin := map[string]bool{}
	for _, n := range toolrun.ToolNames() {
		builtin[n] = true
	}
	var out []fsops.Finding
	for _, h := range treeTools(root) {
		rel := root.RelPath(h.Path)
		if builtin[h.Name] && h.Dir != root.ToolDir() {
			out = append(out, fsops.Finding{Status: "unexpected", Rel: rel,
				Detail: "shadows the builtin tool " + h.Name + " (tool/" + h.Name + ") wherever its tier comes first in CTX_PATH"})
			continue
		}
		b, err := fsops.ReadControl(filepath.Join(h.ControlDir, "mcp"))
		if err != nil {
			continue
		}
		if loc, err := object.ParseLocator(b); err == nil && object.IsReservedToolGroup(loc.Server) {
			out = append(out, fsops.Finding{Status: "unexpected", Rel: rel,
				Detail: "projected from MCP server " + loc.Server + ", the name of a builtin tool group: it sits among ctx's own " + loc.Server + ".* tools; rename the server and project again"})
		}
	}
	return out
}

// checkSharedSpaces reports each shared space on a network or FUSE
// filesystem whose caches can make the queue's answers stale across
// hosts, or that lacks an atomic create-without-replace, with the fix.
func checkSharedSpaces(root fsops.Root) []fsops.Finding {
	ents, _ := os.ReadDir(filepath.Join(root.Dir, "shared"))
	var out []fsops.Finding
	for _, en := range ents {
		if queue.ValidSpaceName(en.Name()) != nil || !en.IsDir() {
			continue
		}
		rel := filepath.Join("shared", en.Name(), "queue")
		q, err := queue.Open(root.Dir, en.Name())
		if err != nil {
			if errors.Is(err, queue.ErrNotMounted) {
				out = append(out, fsops.Finding{Status: "missing", Rel: rel, Detail: err.Error()})
			}
			continue
		}
		if w := q.FSWarning(); w != "" {
			out = append(out, fsops.Finding{Status: "unexpected", Rel: rel, Detail: w})
		}
		if q.FS().Remote {
			if err := q.CheckPrimitives(); err != nil {
				out = append(out, fsops.Finding{Status: "invalid", Rel: rel, Detail: err.Error()})
			}
		}
		q.Close()
	}
	return out
}
