package tsh

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

type builtin struct {
	usage, summary string
	run            func(sh *Shell, args []string) int
}

// builtins is filled in init: the help builtin lists the table, and a
// composite literal referring to it would be an initialization cycle.
var builtins map[string]builtin

func init() {
	builtins = map[string]builtin{
		"help":    {"help [NAME]", "this list, a builtin's usage, or a tool's metadata", (*Shell).builtinHelp},
		"tools":   {"tools [-l|--long] [GROUP]", "list the tools visible through CTX_PATH (GROUP: name before the first dot)", (*Shell).builtinTools},
		"which":   {"which TOOL...", "print the path each TOOL resolves to", (*Shell).builtinWhich},
		"type":    {"type NAME...", "say whether each NAME is a builtin or a tool", (*Shell).builtinType},
		"command": {"command [-v] NAME [ARG...]", "-v: print a builtin's name or a tool's path; else run tool NAME even if a builtin has its name", (*Shell).builtinCommand},
		"load":    {"load TOOL...", "add tool metadata to the context (never runs the tool)", (*Shell).builtinLoad},
		"unload":  {"unload TOOL...", "remove unpinned tools from the context", (*Shell).builtinUnload},
		"loads":   {"loads", "list the context: NAME, PATH, STATE, description", (*Shell).builtinLoads},
		"pin":     {"pin TOOL...", "load tools and protect them from auto-unload and cache eviction", (*Shell).builtinPin},
		"unpin":   {"unpin TOOL...", "remove the protection", (*Shell).builtinUnpin},
		"pins":    {"pins", "list pinned tools", (*Shell).builtinPins},
		"exit":    {"exit [CODE]", "leave tsh with CODE (0..255; default: the last status)", (*Shell).builtinExit},
		"quit":    {"quit [CODE]", "same as exit", (*Shell).builtinExit},
	}
}

// Execute runs one command (a builtin or a tool) and returns its status.
func (sh *Shell) Execute(words []string) int {
	if b, ok := builtins[words[0]]; ok {
		return b.run(sh, words[1:])
	}
	return sh.runTool(words[0], words[1:])
}

func (sh *Shell) out(format string, args ...any) {
	fmt.Fprintf(sh.env.Stdout, format, args...)
}

// notFound reports a failed lookup and returns code. A missing tool gets
// the "try: tools" hint; an impossible name says why it is impossible. A
// tool the agent's run refused (its policy account names the layer) is
// not "not found": the person must hear which layer to change, and a
// refusal to run it exits 13 (code NotFound becomes Denied). A host
// program's name (ls) gets the tool that runs programs.
func (sh *Shell) notFound(name string, err error, code int) int {
	if errors.Is(err, syscall.EINVAL) {
		var pe interface{ Unwrap() error }
		if errors.As(err, &pe) {
			err = pe.Unwrap()
		}
		sh.errorf("%s (tsh runs only tools found by name through CTX_PATH)", err)
		return code
	}
	if agent, layer, ok := sh.refusal(name); ok {
		sh.deniedf("%s: not visible to this agent, refused by %s (explain: ctx policy explain %s tool:%s execute)", name, layer, agent, name)
		if code == cli.NotFound {
			code = cli.Denied
		}
		return code
	}
	sh.errorf("tool not found in CTX_PATH: %s", name)
	if isHostProgram(name) {
		fmt.Fprintf(sh.env.Stderr, "%s is a program, not a tool: run it with shell.exec '{\"cmd\":\"%s ...\"}' (where the agent is granted shell.exec)\n", name, name)
	}
	fmt.Fprintln(sh.env.Stderr, "try: tools")
	return code
}

// procPolicyFile is the run's policy account (a variable only so tests
// can point it elsewhere).
var procPolicyFile = policy.ProcPolicyPath

// refusal reports the agent and the layer that keeps tool name out of
// this sandbox, from the run's policy account: only inside a sandbox,
// where the account is the run host's.
func (sh *Shell) refusal(name string) (agent string, layer policy.Layer, ok bool) {
	ctx, err := detectContext(sh.env)
	if err != nil || ctx.Source != policy.ContextSandbox {
		return "", "", false
	}
	data, err := fsops.ReadControl(procPolicyFile)
	if err != nil {
		return "", "", false
	}
	layer, ok = policy.ToolRefusal(data, name)
	return ctx.Agent, layer, ok
}

// isHostProgram reports whether name, a plain tool name, is a program in
// the system's directories (ls, make, git).
func isHostProgram(name string) bool {
	if policy.ValidName(name) != nil {
		return false
	}
	for _, dir := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		if st, err := os.Stat(dir + "/" + name); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

func (sh *Shell) usage(name string) int {
	sh.errorf("usage: %s", builtins[name].usage)
	return cli.Usage
}

func (sh *Shell) builtinHelp(args []string) int {
	switch len(args) {
	case 0:
		sh.out("tsh runs tools found through CTX_PATH; it is not a shell.\n")
		sh.out("Words are split on blanks; '...' and \"...\" group, \\ escapes; nothing else is special.\n\n")
		names := make([]string, 0, len(builtins))
		for n := range builtins {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			sh.out("  %-26s %s\n", builtins[n].usage, builtins[n].summary)
		}
		sh.out("  %-26s %s\n", "TOOL [ARG...]", "run a tool (inside an agent context only)")
		sh.out("  %-26s %s\n", "TOOL --help", "a tool's metadata, like help TOOL")
		return cli.OK
	case 1:
		if b, ok := builtins[args[0]]; ok {
			sh.out("%s\n  %s\n", b.usage, b.summary)
			return cli.OK
		}
		hit, err := sh.resolve(args[0])
		if err != nil {
			return sh.notFound(args[0], err, cli.Failure)
		}
		return sh.printToolHelp(hit)
	}
	return sh.usage("help")
}

// printToolHelp prints a tool's metadata:
//
//	NAME<TAB>PATH
//	description: FIRST LINE
//	  MORE LINES
//	schema: TITLE
//	schema description: TEXT
//	required: A, B
//
// Lines for absent fields are left out. All tool text is escaped.
func (sh *Shell) printToolHelp(hit fsops.ToolHit) int {
	m, err := readMetadata(hit)
	sh.out("%s\t%s\n", hit.Name, cli.Escape(hit.Path))
	if err != nil {
		sh.errorf("%v", err)
		return cli.Failure
	}
	field := func(label, text string) {
		if text == "" {
			return
		}
		lines := strings.Split(cli.EscapeLines(text), "\n")
		sh.out("%s: %s\n", label, lines[0])
		for _, l := range lines[1:] {
			sh.out("  %s\n", l)
		}
	}
	field("description", m.Description)
	field("schema", m.SchemaTitle)
	field("schema description", m.SchemaDescription)
	if len(m.Required) > 0 {
		req := make([]string, len(m.Required))
		for i, r := range m.Required {
			req[i] = cli.Escape(r)
		}
		sh.out("required: %s\n", strings.Join(req, ", "))
	}
	return cli.OK
}

func (sh *Shell) builtinTools(args []string) int {
	long := false
	group := ""
	for _, a := range args {
		switch {
		case a == "-l" || a == "--long":
			long = true
		case strings.HasPrefix(a, "-"):
			sh.errorf("tools: unknown option %s", a)
			return sh.usage("tools")
		case group != "":
			return sh.usage("tools")
		default:
			group = a
		}
	}
	hits, truncated := fsops.ListTools(sh.dirs)
	matched := 0
	for _, h := range hits {
		if g, _, _ := strings.Cut(h.Name, "."); group != "" && g != group {
			continue
		}
		matched++
		if !long {
			sh.out("%s\n", h.Name)
			continue
		}
		sh.out("%s\t%s", h.Name, cli.Escape(h.Path))
		// A listing shows what it can: a tool with unreadable metadata is
		// still listed, without a description (help TOOL says why).
		if m, err := readMetadata(h); err == nil && m.Description != "" {
			sh.out("\t%s", cli.Escape(m.FirstLine()))
		}
		sh.out("\n")
	}
	if truncated {
		sh.errorf("tools: listing stopped at %d tools", fsops.MaxListedTools)
	}
	// No tool at all is almost always the wrong tree (no --root, CTX_ROOT
	// unset, nothing bootstrapped): an empty listing with status 0 would
	// look like a tree without tools. Say where tsh looked.
	if group == "" && matched == 0 {
		var missing []string
		for _, d := range sh.dirs {
			if st, err := os.Stat(d); err != nil || !st.IsDir() {
				missing = append(missing, d)
			}
		}
		why := "none of them holds a tool"
		if len(missing) == len(sh.dirs) {
			why = "none of them exists; make a tree with ctx bootstrap --root " + fsops.ShellQuote(sh.root.Dir) + " or choose one with --root DIR or CTX_ROOT"
		}
		sh.errorf("tools: no tool in CTX_PATH %s: %s", cli.Escape(strings.Join(sh.dirs, ":")), why)
		return cli.Failure
	}
	// An empty answer to a question about a group must not look like a
	// group with no output: say so, and fail as which does.
	if group != "" && matched == 0 {
		hint := ""
		if g, _, _ := strings.Cut(group, "."); g != group && g != "" {
			hint = fmt.Sprintf(" (a group is the name before the first dot: try tools %s)", g)
		}
		sh.errorf("tools: no tool in group %s in CTX_PATH%s", group, hint)
		return cli.Failure
	}
	return cli.OK
}

func (sh *Shell) builtinWhich(args []string) int {
	if len(args) == 0 {
		return sh.usage("which")
	}
	code := cli.OK
	for _, name := range args {
		hit, err := sh.resolve(name)
		if err != nil {
			code = sh.notFound(name, err, cli.Failure)
			continue
		}
		sh.out("%s\n", cli.Escape(hit.Path))
	}
	return code
}

func (sh *Shell) builtinType(args []string) int {
	if len(args) == 0 {
		return sh.usage("type")
	}
	code := cli.OK
	for _, name := range args {
		if _, ok := builtins[name]; ok {
			sh.out("%s is a tsh builtin\n", name)
			continue
		}
		hit, err := sh.resolve(name)
		if err != nil {
			code = sh.notFound(name, err, cli.Failure)
			continue
		}
		sh.out("%s is %s\n", name, cli.Escape(hit.Path))
	}
	return code
}

// builtinCommand is `command -v NAME...` (POSIX: silent, status 1 when a
// name is neither builtin nor tool) and `command TOOL ARGS`, which runs a
// tool whose name a builtin shadows.
func (sh *Shell) builtinCommand(args []string) int {
	if len(args) == 0 {
		return sh.usage("command")
	}
	if args[0] != "-v" {
		if args[0] == "--" {
			args = args[1:]
		}
		if len(args) == 0 {
			return sh.usage("command")
		}
		return sh.runTool(args[0], args[1:])
	}
	if len(args) == 1 {
		return sh.usage("command")
	}
	code := cli.OK
	for _, name := range args[1:] {
		if _, ok := builtins[name]; ok {
			sh.out("%s\n", name)
			continue
		}
		hit, err := sh.resolve(name)
		if err != nil {
			code = cli.Failure
			continue
		}
		sh.out("%s\n", cli.Escape(hit.Path))
	}
	return code
}

// resolveMeta resolves a tool and reads its metadata, reporting errors.
func (sh *Shell) resolveMeta(name string) (fsops.ToolHit, Metadata, bool) {
	hit, err := sh.resolve(name)
	if err != nil {
		sh.notFound(name, err, cli.Failure)
		return hit, Metadata{}, false
	}
	m, err := readMetadata(hit)
	if err != nil {
		sh.errorf("load %s: %v", name, err)
		return hit, m, false
	}
	return hit, m, true
}

func (sh *Shell) reportUnloaded(gone []*Loaded) {
	for _, l := range gone {
		sh.out("auto-unloaded %s\tcontext-limit\n", l.Name)
	}
}

// forEachName runs fn for each NAME a builtin was given (at least one):
// Failure when fn failed for any of them, which it has reported.
func (sh *Shell) forEachName(builtin string, args []string, fn func(name string) bool) int {
	if len(args) == 0 {
		return sh.usage(builtin)
	}
	code := cli.OK
	for _, name := range args {
		if !fn(name) {
			code = cli.Failure
		}
	}
	return code
}

func (sh *Shell) builtinLoad(args []string) int {
	return sh.forEachName("load", args, func(name string) bool {
		hit, m, ok := sh.resolveMeta(name)
		if ok {
			gone := sh.loaded.Load(name, hit.Path, m)
			sh.out("loaded %s\t%s\tmetadata\n", name, cli.Escape(hit.Path))
			sh.reportUnloaded(gone)
		}
		return ok
	})
}

func (sh *Shell) builtinUnload(args []string) int {
	return sh.forEachName("unload", args, func(name string) bool {
		l, ok := sh.loaded.Unload(name)
		switch {
		case !ok:
			sh.errorf("%s is not loaded", name)
			return false
		case l.Pinned:
			sh.errorf("%s is pinned; run `unpin %s` before unload", name, name)
			return false
		}
		sh.out("unloaded %s\t%s\n", name, cli.Escape(l.Path))
		return true
	})
}

// listLoaded prints NAME<TAB>PATH<TAB>STATE[<TAB>description]. STATE is
// pinned or metadata: this implementation never keeps a tool resident (no
// dynamic libraries are loaded), so the reference's +resident never shows.
func (sh *Shell) listLoaded(args []string, pinnedOnly bool, name string) int {
	if len(args) != 0 {
		return sh.usage(name)
	}
	for _, l := range sh.loaded.Entries(pinnedOnly) {
		state := "metadata"
		if l.Pinned {
			state = "pinned"
		}
		sh.out("%s\t%s\t%s", l.Name, cli.Escape(l.Path), state)
		if d := l.Meta.FirstLine(); d != "" {
			sh.out("\t%s", cli.Escape(d))
		}
		sh.out("\n")
	}
	return cli.OK
}

func (sh *Shell) builtinLoads(args []string) int { return sh.listLoaded(args, false, "loads") }
func (sh *Shell) builtinPins(args []string) int  { return sh.listLoaded(args, true, "pins") }

func (sh *Shell) builtinPin(args []string) int {
	return sh.forEachName("pin", args, func(name string) bool {
		hit, m, ok := sh.resolveMeta(name)
		if !ok {
			return false
		}
		sh.loaded.Pin(name, hit.Path, m)
		if c, ok := sh.cache.Peek(name); ok {
			sh.cache.Pin(name, c)
		}
		sh.out("pinned metadata %s\t%s\n", name, cli.Escape(hit.Path))
		return true
	})
}

func (sh *Shell) builtinUnpin(args []string) int {
	return sh.forEachName("unpin", args, func(name string) bool {
		l, ok, gone := sh.loaded.Unpin(name)
		if !ok {
			sh.errorf("%s is not loaded", name)
			return false
		}
		sh.cache.Unpin(name)
		sh.out("unpinned %s\t%s\n", name, cli.Escape(l.Path))
		sh.reportUnloaded(gone)
		return true
	})
}

func (sh *Shell) builtinExit(args []string) int {
	code := sh.last
	switch len(args) {
	case 0:
	case 1:
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 0 || n > 255 || strconv.Itoa(n) != args[0] {
			sh.errorf("exit: code must be 0..255, not %q", args[0])
			return cli.Usage
		}
		code = n
	default:
		return sh.usage("exit")
	}
	sh.exiting = true
	return code
}
