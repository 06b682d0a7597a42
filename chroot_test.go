package main

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"ctx/fsops/sandbox"
)

// TestBusyboxChroot is the main job where a minimal image puts ctx: a root
// that holds busybox-static and ctx and nothing else (no /proc, /dev, /etc,
// /tmp, /run), entered with chroot(2), as root and as uid 65534. There ctx
// bootstraps a tree, runs a tool, reports what the host offers, and starts
// the reference agent coder in the strongest mode that works: inside a
// chroot the kernel refuses user namespaces, so iso auto must choose
// landlock for uid 65534, and for root uid (if the start can make a new
// root there) or landlock: the mode doctor reports, the one the start
// records. A write the agent is denied leaves its target untouched, and
// the run's events are there.
func TestBusyboxChroot(t *testing.T) {
	required := os.Getenv("CTX_REQUIRE_SANDBOX") != ""
	if os.Geteuid() != 0 {
		if required {
			t.Fatal("the chroot test needs root (chroot(2), mounting /proc), required here (CTX_REQUIRE_SANDBOX)")
		}
		t.Skip("needs root")
	}
	busybox, err := staticBusybox()
	if err != nil {
		if required {
			t.Fatalf("a static busybox is required here (CTX_REQUIRE_SANDBOX): %v (apt-get install busybox-static; .ci/run does)", err)
		}
		t.Skip(err)
	}
	root, err := os.MkdirTemp(workRoot, "chroot-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	for _, d := range []string{"bin", "work", "u"} {
		must(t, os.Mkdir(filepath.Join(root, d), 0o755))
	}
	copyFile(t, busybox, filepath.Join(root, "bin", "busybox"))
	copyFile(t, filepath.Join(binDir, "ctx"), filepath.Join(root, "bin", "ctx"))
	c := chroot{t: t, root: root}
	c.ok(0, "/", "/bin/busybox", "--install", "-s", "/bin")
	for _, p := range []string{"proc", "dev", "etc", "tmp", "run", "etc/passwd"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Fatalf("the chroot has /%s; it must start without", p)
		}
	}

	// Nothing in it needs /proc but a run's start: the binary is found
	// through AT_EXECFN (bootstrap copies it, --install links it).
	c.ok(0, "/", "ctx", "bootstrap", "--root", "/ctx")
	out := c.ok(0, "/", "ctx", "--version")
	c.match(out, `^ctx \S+\ncommit .*\ngo     go1`)
	c.ok(0, "/", "ctx", "--install", "/usr/local/bin")
	if _, err := os.Lstat(filepath.Join(root, "usr/local/bin/fs.read")); err != nil {
		t.Errorf("--install without /proc: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "usr/local/bin/bash")); err == nil {
		t.Error("--install linked bash unasked")
	}
	os.WriteFile(filepath.Join(root, "work", "hello.txt"), []byte("hello from the chroot\n"), 0o644)
	out = c.ok(0, "/work", "/ctx/tool/fs.read", "hello.txt")
	c.match(out, `^hello from the chroot\n$`)
	out = c.ok(0, "/work", "/usr/local/bin/fs.read", `{"path":"hello.txt"}`)
	c.match(out, `^hello from the chroot\n$`)

	// What the host offers here, as doctor sees it. Without /proc, doctor
	// and ctx agent start must agree: either doctor names /proc as what
	// keeps every agent from starting and the start refuses, naming
	// /proc, or the start works.
	landlock, _ := sandbox.LandlockABI()
	mode := "landlock"
	if landlock == 0 {
		mode = "cannot start"
	}
	must(t, os.MkdirAll(filepath.Join(root, "var", "tmp"), 0o755))
	os.Chmod(filepath.Join(root, "var", "tmp"), 0o1777)
	tmp := []string{"TMPDIR=/var/tmp"}
	out = c.run(-2, "/", nil, "ctx", "doctor", "--root", "/ctx")
	c.match(out, `(?m)^host \(uid 0\): user namespaces no \(.*\), mount namespaces .*, / a mount point no \(a chroot\? a new root is moved over / and chrooted into, not pivoted\), .*/proc not mounted$`)
	if strings.Contains(out, "missing /proc: not mounted: ctx agent start needs it, so no agent can start\n  fix: mount -t proc proc /proc\n") {
		out = c.run(69, "/work", tmp, "ctx", "agent", "start", "--root", "/ctx", "coder", "--", "true")
		c.match(out, `^ctx agent start: .*/proc`)
	} else {
		c.run(0, "/work", tmp, "ctx", "agent", "start", "--root", "/ctx", "coder", "--", "true")
	}

	proc := filepath.Join(root, "proc")
	must(t, os.Mkdir(proc, 0o555))
	must(t, syscall.Mount("proc", proc, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""))
	defer syscall.Unmount(proc, syscall.MNT_DETACH)
	// A sandbox with mounts binds /dev/null, /dev/zero, ... from the
	// caller's /dev, as an image's runtime provides it.
	dev := filepath.Join(root, "dev")
	must(t, os.Mkdir(dev, 0o755))
	must(t, syscall.Mount("/dev", dev, "", syscall.MS_BIND, ""))
	defer syscall.Unmount(dev, syscall.MNT_DETACH)
	out = c.run(0, "/", nil, "ctx", "doctor", "--root", "/ctx")
	// Root may make a mount namespace in a chroot: where pivot_root is
	// refused the sandbox moves its new root over / and chroots into it,
	// so root's agents get iso uid and the whole /mnt.
	rootMode := "uid"
	c.match(out, `(?m)^agents \(starting as uid 0\): architect uid, coder uid$`)

	// No /tmp, no /run: the refusal names both TMPDIR and /tmp, and exits
	// 69 before anything is logged for the run.
	out = c.run(69, "/work", nil, "ctx", "agent", "start", "--root", "/ctx", "coder", "--", "true")
	c.match(out, `^ctx agent start: .*TMPDIR is not set.*/tmp.*set TMPDIR to a directory uid 0 can write, or create /tmp \(mkdir -m 1777 /tmp\)\n$`)

	c.startAgent(tmp, "/ctx", "/work", 60101, rootMode, true)

	// The same as uid 65534, in a tree of its own: the agent runs as that
	// uid, which owns the tree, and still cannot write its controls.
	os.Chown(filepath.Join(root, "u"), 65534, 65534)
	c.uid = 65534
	c.ok(0, "/u", "ctx", "bootstrap", "--root", "/u/ctx")
	for _, d := range []string{"ws", "tmp"} {
		c.ok(0, "/u", "mkdir", "-p", "/u/"+d)
	}
	os.WriteFile(filepath.Join(root, "u", "ws", "hello.txt"), []byte("hello, nobody\n"), 0o644)
	out = c.ok(0, "/u/ws", "/u/ctx/tool/fs.read", "hello.txt")
	c.match(out, `^hello, nobody\n$`)
	out = c.run(69, "/u/ws", nil, "ctx", "agent", "start", "--root", "/u/ctx", "coder", "--", "true")
	c.match(out, `TMPDIR is not set.*uid 65534`)
	out = c.run(0, "/", nil, "ctx", "doctor", "--root", "/u/ctx")
	c.match(out, `(?m)^agents \(starting as uid 65534\): architect `+mode+`, coder `+mode+`$`)
	c.startAgent([]string{"TMPDIR=/u/tmp"}, "/u/ctx", "/u/ws", 65534, mode, landlock > 0)
}

// startAgent runs the main job in the chroot: coder in the mode expected
// (with its id and its tools), a write the agent is denied, the architect
// refused a tool it lacks, and the events of it all.
func (c *chroot) startAgent(env []string, tree, ws string, agentUID int, mode string, works bool) {
	t := c.t
	if !works {
		out := c.run(69, ws, env, "ctx", "agent", "start", "--root", tree, "coder", "--", "true")
		c.match(out, `no isolation works here`)
		return
	}
	// Tools are at /mnt/tools in a mount namespace, in $CTX_PATH without
	// one (iso landlock gives no /mnt).
	list := `id; if [ -d /mnt/tools ]; then ls /mnt/tools; grep "^tool:fs.read " /mnt/proc/policy; test -s /mnt/SOP && echo SOP=yes; else echo "no /mnt: tools in $CTX_PATH"; ls "$CTX_ROOT/tool"; fi; tsh fs.read hello.txt; (cd /../../..; ls -d u 2>/dev/null || echo no-u; chroot /work /bin/true 2>/dev/null && echo CHROOTED || echo chroot-refused)`
	out := c.run(0, ws, env, "ctx", "agent", "start", "--root", tree, "coder", "--", "sh", "-c", list)
	c.match(out, fmt.Sprintf(`(?m)^uid=%d(\(\w+\))? gid=%d`, agentUID, agentUID))
	if mode == "uid" {
		c.match(out, `(?m)^tool:fs\.read execute granted$`)
		c.match(out, `(?m)^SOP=yes$`)
		// ATTACK: leave the new root, which was moved over / and chrooted
		// into (no pivot_root in a chroot): ".." from / stays at /, the
		// chroot's own directories (/u) are not there, and chroot(2)
		// itself is refused (no CAP_SYS_CHROOT).
		c.match(out, `(?m)^no-u$`)
		c.match(out, `(?m)^chroot-refused$`)
	}
	c.match(out, `(?m)^fs\.read$`)
	c.match(out, `(?m)^shell\.exec$`)
	c.match(out, `(?m)^hello`)

	perm := filepath.Join(c.root, tree, "agent", "coder.d", "perm")
	before, err := os.ReadFile(perm)
	if err != nil {
		t.Fatal(err)
	}
	out = c.run(0, ws, env, "ctx", "agent", "start", "--root", tree, "coder", "--", "sh", "-c",
		`echo rwx-evil > `+tree+`/agent/coder.d/perm && echo WROTE; echo denied`)
	c.match(out, `(?m)^denied$`)
	if strings.Contains(out, "WROTE") {
		t.Errorf("the agent wrote its own perm:\n%s", out)
	}
	if after, _ := os.ReadFile(perm); string(after) != string(before) {
		t.Errorf("agent/coder.d/perm changed: %q, was %q", after, before)
	}
	// The architect (perm r--) may not run fs.write: refused by the
	// perm layer, or not even visible where tools are projected (tsh
	// names the layer from the run's policy account).
	out = c.run(-1, ws, env, "ctx", "agent", "start", "--root", tree, "architect", "--", "tsh", "fs.write", "notes.txt", "hello")
	c.match(out, `(ctx: denied: tsh: cannot execute fs.write: EACCES \(perm\)|ctx: denied: tsh: fs.write: not visible to this agent, refused by perm|tool not found in CTX_PATH: fs.write)`)
	if _, err := os.Stat(filepath.Join(c.root, ws, "notes.txt")); err == nil {
		t.Error("the architect's refused fs.write made notes.txt")
	}

	events, err := os.ReadFile(filepath.Join(c.root, tree, "home", fmt.Sprint(agentUID), "agent", "coder", "session", "default", "events.jsonl"))
	if err != nil {
		t.Fatalf("coder's events: %v", err)
	}
	c.match(string(events), `"type":"agent.start","agent":"coder".*"status":"ok".*"detail":"iso=`+mode+` \(asked auto\)`)
	c.match(string(events), `"type":"tool.call","agent":"coder".*"object":"tool/fs.read","status":"ok"`)
	c.match(string(events), `"type":"agent.stop","agent":"coder".*"status":"ok"`)
	// The starts refused earlier (no /proc, no TMPDIR) logged nothing.
	if n := strings.Count(string(events), `"type":"agent.start"`); n != 2 {
		t.Errorf("%d agent.start events, want 2 (one per run)\n%s", n, events)
	}
	archUID, err := os.ReadFile(filepath.Join(c.root, tree, "agent", "architect.d", "uid"))
	if err != nil {
		t.Fatal(err)
	}
	events, err = os.ReadFile(filepath.Join(c.root, tree, "home", strings.TrimSpace(string(archUID)), "agent", "architect", "session", "default", "events.jsonl"))
	if err != nil {
		t.Fatalf("architect's events: %v", err)
	}
	if mode == "uid" {
		// Not projected at all: /mnt/tools and /ctx/tool hold no fs.write.
		if strings.Contains(string(events), `"object":"tool/fs.write","status":"ok"`) {
			t.Errorf("the architect's fs.write ran:\n%s", events)
		}
		return
	}
	c.match(string(events), `"type":"tool.call","agent":"architect".*"object":"tool/fs.write","status":"denied"`)
}

// chroot runs commands inside a root directory with chroot(2), as uid
// (and gid) uid, with PATH=/usr/local/bin:/bin and nothing else from the
// test's environment.
type chroot struct {
	t    *testing.T
	root string
	uid  int
}

// run runs argv in dir (inside the root) and fails the test unless it
// exits with want (-1: any non-zero status; -2: any status); it returns
// stdout and stderr together.
func (c *chroot) run(want int, dir string, env []string, argv ...string) string {
	c.t.Helper()
	// Not exec.Command: it would look the name up on the host. Inside
	// the root, busybox and ctx are in /bin (the applets as links).
	cmd := &exec.Cmd{Path: argv[0], Args: argv}
	if !strings.Contains(argv[0], "/") {
		cmd.Path = "/bin/" + argv[0]
	}
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/local/bin:/bin", "HOME=/"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: c.root}
	if c.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.uid)}
	}
	out, err := cmd.CombinedOutput()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	if got != want && !(want == -1 && got != 0) && want != -2 {
		c.t.Fatalf("uid %d in the chroot, %s: exit %d, want %d\n%s", c.uid, strings.Join(argv, " "), got, want, out)
	}
	return string(out)
}

func (c *chroot) ok(want int, dir string, argv ...string) string {
	c.t.Helper()
	return c.run(want, dir, nil, argv...)
}

func (c *chroot) match(text, re string) {
	c.t.Helper()
	if !regexp.MustCompile(re).MatchString(text) {
		c.t.Errorf("no match for %s in:\n%s", re, text)
	}
}

// staticBusybox finds busybox on the host and checks that it needs no
// dynamic loader (the chroot has no /lib).
func staticBusybox() (string, error) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				static = false
			}
		}
		f.Close()
		if static {
			return p, nil
		}
	}
	return "", fmt.Errorf("no static busybox in /bin or /usr/bin")
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(dst, b, 0o755))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
