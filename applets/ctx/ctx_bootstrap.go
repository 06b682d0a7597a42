package ctx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"ctx/applets/cli"
	"ctx/fsops"
	keptns "ctx/fsops/kept"
)

// RunBootstrap is `ctx bootstrap [--root DIR] [-v]`: create or repair the
// reference tree, idempotently. It prints what it found wrong (kept,
// repaired) and a summary; -v prints every path it changed.
func RunBootstrap(e *cli.Env, args []string) int {
	var rootFlag string
	var verbose bool
	f := cli.NewFlags()
	f.String("root", &rootFlag)
	f.Bool("v", &verbose)
	f.Bool("verbose", &verbose)
	if _, code, ok := cli.ParseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	root := fsops.SelectRoot(rootFlag, e.Getenv)
	self, err := selfBytes()
	if err != nil {
		return cli.Fail(e, cli.Internal, "cannot read own executable: %v", err)
	}
	owner := treeOwner{UID: os.Geteuid(), GID: os.Getegid()}
	entries := referenceTree(owner, self)

	if st, err := os.Stat(root.Dir); err == nil && !fsops.Writable(root.Dir) {
		// Someone else's tree (typically a root-made /ctx): build only our
		// own home in it, and leave the system part to its owner.
		entries = homeEntries(entries, owner)
		fmt.Fprintf(e.Stdout, "ctx bootstrap: %s is not writable by uid %d (owner uid %d); creating only home/%d\n",
			root.Dir, owner.UID, st.Sys().(*syscall.Stat_t).Uid, owner.UID)
	}

	managed := previouslyManaged(root)
	actions, err := root.Reconcile(entries, func(rel string) bool { return managed[rel] })
	for _, a := range actions {
		if verbose || a.Verb == "kept" || a.Verb == "repaired" {
			fmt.Fprintln(e.Stdout, a)
		}
	}
	if err != nil {
		return cli.Fail(e, cli.Failure, "%s", bootstrapError(root, err))
	}
	kept := 0
	for _, a := range actions {
		if a.Verb == "kept" {
			kept++
		}
	}
	if owner.UID == 0 {
		// A root caller's uid-mode runs keep their sandboxes' templates in
		// one namespace kept for them (ctx man sandbox, MODES), made here
		// once: the host's mount table gains its two mounts when a tree is
		// made, not during a run. Best effort: a run makes it otherwise.
		if runtime, err := fsops.RuntimeDir(0); err == nil {
			keptns.KeepHolder(runtime)
		}
	}
	// Reported, not repaired: the control is the tool author's claim, so
	// bootstrap neither rewrites nor removes it (as it never removes what
	// it did not create); the tool is ineligible until someone fixes it.
	invalid := checkProgramControls(root)
	for _, f := range invalid {
		fmt.Fprintln(e.Stdout, f)
	}
	switch {
	case len(actions) == 0 && len(invalid) == 0:
		fmt.Fprintf(e.Stdout, "ctx bootstrap: %s is up to date\n", root.Dir)
	default:
		fmt.Fprintf(e.Stdout, "ctx bootstrap: %s: %d change(s)%s\n", root.Dir, len(actions)-kept, actionCounts(actions, verbose))
	}
	if kept > 0 {
		return cli.Fail(e, cli.Failure, "%d path(s) hold files bootstrap did not create; left unchanged (see ctx doctor%s)", kept, root.Option())
	}
	if len(invalid) > 0 {
		return cli.Fail(e, cli.Failure, "%d program control(s) invalid: the tools are ineligible for programmatic calling; left unchanged (see ctx doctor%s)", len(invalid), root.Option())
	}
	return cli.OK
}

// actionCounts is the summary's account of the changes by kind, " (329
// created; ctx bootstrap -v lists each)", or "" when each was listed.
func actionCounts(actions []fsops.Action, verbose bool) string {
	if verbose {
		return ""
	}
	counts := map[string]int{}
	for _, a := range actions {
		counts[a.Verb]++
	}
	var parts []string
	for _, v := range []string{"created", "updated", "relinked", "repaired"} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + "; ctx bootstrap -v lists each)"
}

// bootstrapError words a failed bootstrap. A tree the caller may not make
// (the default /ctx, as a user) is the common first stumble: name the
// two ways on.
func bootstrapError(root fsops.Root, err error) string {
	msg := err.Error()
	if errors.Is(err, fs.ErrPermission) && os.Geteuid() != 0 {
		msg += "; make the tree as root (sudo ctx bootstrap" + root.Option() + "), or one of your own: ctx bootstrap --root ~/ctx"
	}
	return msg
}

// homeEntries keeps only the caller's home and its parent.
func homeEntries(entries []fsops.Entry, o treeOwner) []fsops.Entry {
	prefix := "home/" + strconv.Itoa(o.UID)
	var out []fsops.Entry
	for _, en := range entries {
		if en.Rel == prefix || strings.HasPrefix(en.Rel, prefix+"/") {
			out = append(out, en)
		}
	}
	return out
}

// previouslyManaged reads the paths an earlier bootstrap recorded. A missing
// or unreadable record means nothing is known to be ours.
func previouslyManaged(root fsops.Root) map[string]bool {
	b, err := fsops.ReadRegular(root.Path(bootstrapRecord), 4<<20)
	if err != nil {
		return nil
	}
	var rec struct {
		Managed []string `json:"managed"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return nil
	}
	m := make(map[string]bool, len(rec.Managed))
	for _, r := range rec.Managed {
		m[r] = true
	}
	return m
}
