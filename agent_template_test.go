package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// A root caller's uid-mode runs start from a template kept per agent and
// policy (ctx man sandbox, MODES). These tests attack the kept template:
// between two runs the policy, a source and the kept namespace itself
// change, and the second run must show what its own plan would have
// built, never the first run's view.

// templateProbe prints what the tests compare of a run's view.
const templateProbe = `stat -c 'etc=%d' /etc; stat -c 'fsread=%i' /ctx/tool/fs.read; ` +
	`cat /ctx/shared/cortexfs-docs/marker 2>/dev/null || echo marker=none; echo "tools=$(ls /ctx/tool | tr '\n' ' ')"; ` +
	`echo "sop=$(head -c 60 /mnt/SOP | tr '\n' ' ')"; touch /home/agent/.w 2>/dev/null && echo home=rw || echo home=ro; ` +
	`echo "host=$(cat /etc/hostname)"; echo "agents=$(ls /ctx/agent | tr '\n' ' ')"; test -e "$SECRET" && echo secret=visible || echo secret=hidden`

type templateRun struct {
	t        *testing.T
	root, ws string
	secret   string
}

func (r templateRun) start(agent string) map[string]string {
	r.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "ctx"), "agent", "start", "--root", r.root, agent, "--",
		"sh", "-c", strings.ReplaceAll(templateProbe, "$SECRET", r.secret))
	cmd.Dir = r.ws
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("ctx agent start %s: %v\n%s", agent, err, out)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = strings.TrimSpace(v)
		}
	}
	return got
}

// inHolder runs fn on a thread of its own in the namespace the kept
// templates live in (the thread is dropped afterwards).
func inHolder(t *testing.T, fn func() error) {
	t.Helper()
	rt, err := fsops.RuntimeDir(0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := unix.Open(filepath.Join(rt, "kept", "holder"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(h)
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			done <- err
			return
		}
		if err := unix.Setns(h, unix.CLONE_NEWNS); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// keptPins lists the templates kept for the tree at root, by agent.
func keptPins(t *testing.T, root string) map[string]string {
	key, err := fsops.Root{Dir: root}.RuntimeKey()
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]string{}
	inHolder(t, func() error {
		names, err := fsops.DirNames("/" + key)
		for _, n := range names {
			if a, _, ok := strings.Cut(strings.TrimPrefix(n, "mnt@"), "@"); ok && strings.HasPrefix(n, "mnt@") {
				pins[a] = "/" + key + "/" + n
			}
		}
		return err
	})
	return pins
}

// replacePin puts at pin (in the holder) the detached mount tree tree
// opens (run on the holder thread).
func replacePin(pin string, tree func() (int, error)) error {
	fd, err := tree()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	unix.Unmount(pin, unix.MNT_DETACH)
	return unix.MoveMount(fd, "", unix.AT_FDCWD, pin, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

func keptMounts(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return len(regexp.MustCompile(`(?m)/kept(/|\s)`).FindAll(b, -1))
}

// TestSandboxTemplateNeverStale: the second run of an agent uses the
// template the first kept (the same tmpfs under /etc); a policy change, a
// tool file replaced, a source directory replaced, a mount over a source
// and the agent's SOP each show in the next run; the host's mount table
// gains nothing from it.
func TestSandboxTemplateNeverStale(t *testing.T) {
	root, ws := newAgentTree(t, "tmpl-")
	if os.Geteuid() != 0 {
		t.Skip("a template is a root caller's uid-mode runs'")
	}
	r := templateRun{t: t, root: root, ws: ws, secret: filepath.Join(filepath.Dir(root), "host-secret")}
	os.WriteFile(r.secret, []byte("x"), 0o600)
	docs := filepath.Join(root, "shared", "cortexfs-docs")
	before := keptMounts(t)

	first := r.start("coder")
	second := r.start("coder")
	if first["etc"] != second["etc"] {
		t.Fatalf("the second run's /etc is another tmpfs (%s, %s): no template kept", first["etc"], second["etc"])
	}
	if second["host"] != "ctx-coder" || second["secret"] != "hidden" || !strings.Contains(second["tools"], "tmux") {
		t.Fatalf("the template's view: %v", second)
	}

	// A tool the trust rule now sets aside (writable by others) is gone.
	tmux := filepath.Join(root, "tool", "tmux.d")
	os.Chmod(tmux, 0o777)
	if got := r.start("coder"); strings.Contains(got["tools"], "tmux") {
		t.Errorf("an untrusted tool is still shown: %s", got["tools"])
	}
	os.Chmod(tmux, 0o755)
	if got := r.start("coder"); !strings.Contains(got["tools"], "tmux") {
		t.Errorf("the tool trusted again is not shown: %s", got["tools"])
	}

	// A tool's file replaced (a new inode at its name).
	tool := filepath.Join(root, "tool", "fs.read")
	b, _ := os.ReadFile(tool)
	os.WriteFile(tool+".new", b, 0o755)
	os.Rename(tool+".new", tool)
	var st syscall.Stat_t
	syscall.Stat(tool, &st)
	if got := r.start("coder"); got["fsread"] != strconv.FormatUint(st.Ino, 10) {
		t.Errorf("the replaced tool file: shown inode %s, the host's %d", got["fsread"], st.Ino)
	}

	// A source directory replaced by another, then covered by a mount.
	os.Rename(docs, docs+".old")
	os.Mkdir(docs, 0o755)
	os.WriteFile(filepath.Join(docs, "marker"), []byte("marker=new-dir\n"), 0o644)
	if got := r.start("coder"); got["marker"] != "new-dir" {
		t.Errorf("the replaced directory: %q", got["marker"])
	}
	if err := unix.Mount("tmpfs", docs, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(docs, "marker"), []byte("marker=mounted\n"), 0o644)
	got := r.start("coder")
	unix.Unmount(docs, unix.MNT_DETACH)
	if got["marker"] != "mounted" {
		t.Errorf("the mount over a source: %q", got["marker"])
	}
	if got := r.start("coder"); got["marker"] != "new-dir" {
		t.Errorf("the source unmounted again: %q", got["marker"])
	}

	// perm without w: the home read-only; the SOP rewritten.
	perm := filepath.Join(root, "agent", "coder.d", "perm")
	os.WriteFile(perm, []byte("r-x\n"), 0o644)
	os.WriteFile(filepath.Join(root, "agent", "coder.d", "system.md"), []byte("the new standing orders\n"), 0o644)
	got = r.start("coder")
	if got["home"] != "ro" || !strings.Contains(got["sop"], "the new standing orders") {
		t.Errorf("perm r-x and a new SOP: home=%s sop=%q", got["home"], got["sop"])
	}
	os.WriteFile(perm, []byte("rwx\n"), 0o644)
	if got := r.start("coder"); got["home"] != "rw" {
		t.Errorf("perm rwx again: home=%s", got["home"])
	}

	if n := keptMounts(t); n != before {
		t.Errorf("the host's mount table has %d mounts of kept namespaces, %d before", n, before)
	}
}

// TestSandboxTemplateForged: what stands where a template is kept is used
// only when it is one built for that very key: the host's own tree,
// another agent's template, an empty directory left where the mount went
// away are each replaced by a template built again, and the run shows its
// own view.
func TestSandboxTemplateForged(t *testing.T) {
	root, ws := newAgentTree(t, "tmplf-")
	if os.Geteuid() != 0 {
		t.Skip("a template is a root caller's uid-mode runs'")
	}
	r := templateRun{t: t, root: root, ws: ws, secret: filepath.Join(filepath.Dir(root), "host-secret")}
	os.WriteFile(r.secret, []byte("x"), 0o600)
	r.start("coder")
	r.start("architect")
	pins := keptPins(t, root)
	if pins["coder"] == "" || pins["architect"] == "" {
		t.Fatalf("kept templates: %v", pins)
	}
	check := func(what string) {
		t.Helper()
		got := r.start("coder")
		if got["host"] != "ctx-coder" || got["secret"] != "hidden" || got["agents"] != "coder coder.d" {
			t.Errorf("%s: the run's view: %v", what, got)
		}
	}
	forge := func(what string, ns func() (int, error)) {
		t.Helper()
		pin := keptPins(t, root)["coder"]
		inHolder(t, func() error { return replacePin(pin, ns) })
		check(what)
	}
	// The host's root filesystem, copied here (without its submounts:
	// the holder itself is one, which the kernel will not put in itself).
	hostTree, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	forge("the host's tree", func() (int, error) { return hostTree, nil })
	// Another agent's template.
	architect := keptPins(t, root)["architect"]
	forge("another agent's template", func() (int, error) {
		return unix.OpenTree(unix.AT_FDCWD, architect, unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE|unix.OPEN_TREE_CLOEXEC)
	})
	// An empty directory where the mount went away.
	pin := keptPins(t, root)["coder"]
	inHolder(t, func() error { return unix.Unmount(pin, unix.MNT_DETACH) })
	check("an empty directory")
}
