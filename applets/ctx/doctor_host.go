package ctx

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/sandbox"
	"ctx/policy"
)

// checkAgentStarts reports, for every agent this caller may start (its
// owner, or root), whether ctx agent start would start it on this host
// and in which mode, by the same choice ctx agent start makes
// (policy.ChooseIso on the probed host). An agent that cannot start is a
// problem, its fix recorded in fixes. agents is the summary: one word or
// two per agent.
func checkAgentStarts(root fsops.Root, host sandbox.HostReport, fixes map[fsops.Finding]string) (out []fsops.Finding, agents []string) {
	caller := uint32(os.Geteuid())
	if !host.Proc {
		// Bootstrap, doctor and the tools work without it; a run's start
		// does not (it finds its own executable, descriptors and children
		// there), whatever mode it would get.
		f := fsops.Finding{Status: "missing", Rel: "/proc", Detail: "not mounted: ctx agent start needs it, so no agent can start"}
		fixes[f] = "mount -t proc proc /proc"
		out = append(out, f)
	}
	names, _ := root.AgentNames()
	for _, name := range names {
		a, err := authority.LoadAgent(root, name)
		if err != nil {
			agents = append(agents, name+" cannot start (its controls are invalid)")
			continue // checkControls reports it
		}
		if f, fix, ok := foreignAgent(root, a, caller); ok {
			fixes[f] = fix
			out = append(out, f)
			agents = append(agents, name+" cannot start (foreign)")
			continue
		}
		if caller != 0 && a.Owner != caller {
			out = append(out, fsops.Finding{Status: "ok", Rel: "agent/" + name,
				Detail: fmt.Sprintf("started by its owner uid %d or root; not checked for uid %d", a.Owner, caller)})
			agents = append(agents, name+" (not yours)")
			continue
		}
		asked := a.Isolation(caller)
		iso, err := policy.ChooseIso(asked, caller, host.Isolation)
		if err != nil {
			f := fsops.Finding{Status: "invalid", Rel: "agent/" + name + ".d/iso",
				Detail: "agent " + name + " cannot start here: " + cli.Escape(err.Error())}
			fixes[f] = startFix(root, name, asked, host)
			out = append(out, f)
			agents = append(agents, name+" cannot start")
			continue
		}
		detail := "starts in iso " + string(iso)
		if iso != asked {
			detail += " (iso " + string(asked) + ")"
		}
		agents = append(agents, name+" "+string(iso))
		if iso == policy.IsoShared {
			detail += ": no isolation at all, identity from the environment only"
		}
		out = append(out, fsops.Finding{Status: "ok", Rel: "agent/" + name, Detail: detail})
		if f, ok := workspaceWriteFinding(root, a, caller, iso); ok {
			out = append(out, f)
		}
		out = append(out, pathViewFindings(root, a, caller, iso, fixes)...)
	}
	return out, agents
}

// workspaceWriteFinding is doctor's account of policy.WorkspaceWriteWarning
// for the current directory, the workspace of a start made here: only for
// root's iso landlock starts, where the agent runs as its own uid on the
// workspace as it is.
func workspaceWriteFinding(root fsops.Root, a *policy.Agent, caller uint32, iso policy.Iso) (fsops.Finding, bool) {
	cwd, err := os.Getwd()
	if caller != 0 || iso != policy.IsoLandlock || err != nil || root.RelPath(cwd) != "" {
		return fsops.Finding{}, false
	}
	f := authority.FileFacts(cwd)
	if f == nil {
		return fsops.Finding{}, false
	}
	w := policy.WorkspaceWriteWarning(a, *f)
	if w == "" {
		return fsops.Finding{}, false
	}
	// A note, not a problem: the directory doctor runs in is only a
	// guess at the workspace (a chroot's / is none).
	return fsops.Finding{Status: "note", Rel: "agent/" + a.Name, Detail: cli.Escape("in iso landlock here, " + w)}, true
}

// foreignAgent is doctor's finding for an agent the caller may not start
// because another uid defined it or may change it, or made its home, and
// its fix.
func foreignAgent(root fsops.Root, a *policy.Agent, caller uint32) (fsops.Finding, string, bool) {
	rel := "agent/" + a.Name + ".d"
	err := root.CheckAgentDef(a.Name, caller)
	if err == nil {
		rel = root.RelPath(root.AgentHome(int(a.UID), a.Name))
		err = root.CheckAgentHome(int(a.UID), a.Name)
	}
	var fe *fsops.ForeignError
	if !errors.As(err, &fe) {
		return fsops.Finding{}, "", false
	}
	f := fsops.Finding{Status: "unexpected", Rel: rel,
		Detail: "foreign: " + cli.Escape(fe.Reason) + "; ctx agent start refuses it"}
	return f, fe.Fix, true
}

// startFix is what makes an agent that cannot start startable: another
// mode that works here, or a host that offers one.
func startFix(root fsops.Root, name string, asked policy.Iso, host sandbox.HostReport) string {
	if asked != policy.IsoAuto {
		if iso, err := policy.ChooseIso(policy.IsoAuto, uint32(os.Geteuid()), host.Isolation); err == nil {
			return fmt.Sprintf("ctx set%s agent/%s.d/iso auto (iso %s works here)", rootOpt(root), name, iso)
		}
	}
	return "run ctx where user namespaces work (outside a chroot or a container that refuses them) or on a kernel with Landlock (5.13+, landlock in lsm=); iso shared runs an agent with no isolation at all, only when its iso control names it"
}

// rootOpt is root.Option(): " --root DIR" for a command in a hint.
func rootOpt(root fsops.Root) string { return root.Option() }

// shellQuote is fsops.ShellQuote.
func shellQuote(s string) string { return fsops.ShellQuote(s) }

// hostLine is the one-line account of the host in doctor's summary.
func hostLine(h sandbox.HostReport) string {
	yes := func(ok bool, why string) string {
		if ok {
			return "yes"
		}
		return "no (" + why + ")"
	}
	iso := h.Isolation
	mountNS := yes(iso.MountNS, iso.MountNSWhy)
	if os.Geteuid() != 0 {
		// Only root makes a mount namespace without a user namespace.
		mountNS = yes(h.Userns, "without a user namespace, only root can")
	}
	parts := []string{
		"user namespaces " + yes(h.Userns, h.UsernsWhy),
		"mount namespaces " + mountNS,
	}
	if iso.RootIsMount {
		parts = append(parts, "/ a mount point yes")
	} else {
		// Which way a run starts here: root's sandbox moves its new root
		// over / and chroots into it (pivot_root is refused in a chroot).
		how := "a chroot?"
		if os.Geteuid() == 0 {
			how += " a new root is moved over / and chrooted into, not pivoted"
		}
		parts = append(parts, "/ a mount point no ("+how+")")
	}
	if iso.Landlock > 0 {
		// What keeps iso landlock off the host's unix sockets (ctx man
		// sandbox, UNIX SOCKETS).
		gate := "iso landlock's unix sockets: the run host's gate, below ABI 9"
		if iso.Landlock >= sandbox.LandlockABIResolveUnix {
			gate = "iso landlock's unix sockets: Landlock"
		}
		parts = append(parts, "Landlock ABI "+strconv.Itoa(iso.Landlock)+" ("+gate+")")
	} else {
		parts = append(parts, "Landlock no ("+iso.LandlockWhy+")")
	}
	parts = append(parts, "seccomp "+yes(h.Seccomp, h.SeccompWhy))
	if h.Cgroup > 0 {
		parts = append(parts, "cgroups v"+strconv.Itoa(h.Cgroup))
	} else {
		parts = append(parts, "cgroups no, rlimits only ("+h.CgroupWhy+")")
	}
	if !h.Proc {
		parts = append(parts, "/proc not mounted")
	}
	return "host (uid " + strconv.Itoa(os.Geteuid()) + "): " + cli.Escape(strings.Join(parts, ", "))
}

// fixFor is the fix doctor prints under a problem: the one its check
// recorded, else one by the kind of finding.
func fixFor(root fsops.Root, f fsops.Finding, fixes map[fsops.Finding]string) string {
	if fix, ok := fixes[f]; ok {
		return fix
	}
	bootstrap := "ctx bootstrap" + rootOpt(root)
	path := shellQuote(root.Path(strings.TrimSuffix(f.Rel, "/")))
	switch {
	case f.Status == "missing", f.Status == "stale",
		f.Status == "invalid" && strings.HasPrefix(f.Detail, "mode "):
		return bootstrap + " (creates what is missing, rewrites ctx's own files, repairs modes)"
	case f.Detail == "is a symlink", f.Detail == "not a directory", f.Detail == "not a regular file":
		return "move " + path + " aside (bootstrap never writes through it), then " + bootstrap
	case strings.HasPrefix(f.Detail, "hook is"):
		return "remove " + path + ", or replace it with an executable regular file"
	case strings.HasPrefix(f.Detail, "not a root ABI entry"):
		return "move " + path + " out of the tree"
	case strings.Contains(f.Detail, "skipped untrusted"):
		return "make the tier's directory owned by root or the tree's owner and writable by no agent, or drop it from " + path
	case strings.Contains(f.Detail, "shadows the builtin tool"):
		return "rename or remove " + path + " (and its .d directory)"
	case strings.Contains(f.Detail, "cannot write the workspace"):
		_, fix, _ := strings.Cut(f.Detail, "): fix: ")
		return fix
	case strings.Contains(f.Detail, "would run as host root"):
		if strings.HasSuffix(f.Rel, "/iso") {
			return "ctx set" + rootOpt(root) + " " + f.Rel + " auto"
		}
		return "ctx set" + rootOpt(root) + " " + f.Rel + " N (an unprivileged uid, and the same for gid)"
	}
	// A control that does not parse: "FILE: line N: field: why".
	if file, _, ok := strings.Cut(f.Detail, ": "); ok && strings.HasPrefix(file, f.Rel+"/") {
		p := shellQuote(root.Path(file))
		if strings.HasSuffix(file, "/policy") {
			return "edit " + p + " at that line (ctx policy check " + p + " checks it)"
		}
		return "edit " + p + " at that line (ctx set" + rootOpt(root) + " " + file + " VALUE checks a value before writing it)"
	}
	return "see ctx man doctor"
}

// printDoctor prints doctor's report. verbose: every check, each problem
// followed by its fix, then the summary; quiet: the problem lines only;
// else the summary first, then only the problems, each with its fix.
func printDoctor(w io.Writer, root fsops.Root, findings []fsops.Finding, fixes map[fsops.Finding]string, host sandbox.HostReport, agents []string, verbose, quiet bool) int {
	problems := 0
	for _, f := range findings {
		if f.Status != "ok" && f.Status != "note" {
			problems++
		}
	}
	list := func(all bool) {
		if !all {
			printProblems(w, root, findings, fixes, quiet)
			return
		}
		for _, f := range findings {
			fmt.Fprintln(w, cli.Escape(f.String()))
			if f.Status != "ok" && !quiet {
				fmt.Fprintln(w, "  fix: "+cli.Escape(fixFor(root, f, fixes)))
			}
		}
	}
	summary := func() {
		if problems == 0 {
			fmt.Fprintf(w, "ctx doctor: %s: %d checks, all ok\n", root.Dir, len(findings))
		} else {
			fmt.Fprintf(w, "ctx doctor: %s: %d checks, %d problem(s)\n", root.Dir, len(findings), problems)
		}
		fmt.Fprintln(w, hostLine(host))
		if len(agents) == 0 {
			agents = []string{"none"}
		}
		fmt.Fprintln(w, "agents (starting as uid "+strconv.Itoa(os.Geteuid())+"): "+cli.Escape(strings.Join(agents, ", ")))
	}
	switch {
	case quiet:
		list(false)
	case verbose:
		list(true)
		summary()
	default:
		summary()
		list(false)
	}
	if problems > 0 {
		return cli.Failure
	}
	return cli.OK
}
