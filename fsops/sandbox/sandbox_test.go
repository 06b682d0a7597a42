package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"ctx/fsops"
	"ctx/policy/sandboxplan"
)

func TestMain(m *testing.M) {
	// The sandbox re-executes this binary as its init; answer as ctx would.
	switch filepath.Base(os.Args[0]) {
	case InitApplet:
		os.Exit(RunInit(os.Stderr))
	case UsernsHoldApplet:
		os.Exit(RunUsernsHold())
	case "sandbox-as-nobody":
		os.Exit(startAsNobody())
	case ToolWorkerApplet:
		os.Exit(testToolWorker())
	}
	os.Exit(m.Run())
}

// requireSandbox skips, or fails when CTX_REQUIRE_SANDBOX is set (CI as
// root), if this kernel and user cannot build a sandbox.
func requireSandbox(t *testing.T) {
	t.Helper()
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
	if err := cmd.Run(); err != nil {
		if os.Getenv("CTX_REQUIRE_SANDBOX") != "" {
			t.Fatalf("sandbox tests required (CTX_REQUIRE_SANDBOX) but namespaces are refused: %v", err)
		}
		t.Skipf("namespaces unavailable: %v", err)
	}
}

// systemOps binds the host system directories read-only, or recreates them
// as symlinks on a merged-/usr system, as the real plan does.
func systemOps() []sandboxplan.Op {
	var ops []sandboxplan.Op
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"} {
		st, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(d)
			ops = append(ops, sandboxplan.Op{Kind: sandboxplan.OpSymlink, Source: target, Target: d})
			continue
		}
		ops = append(ops, sandboxplan.Op{Kind: sandboxplan.OpBind, Source: d, Target: d, ReadOnly: true, NoSuid: true, NoDev: true, Recursive: true})
	}
	return ops
}

func testPlan(t *testing.T, iso string, uid uint32, workspace, script string) *sandboxplan.Plan {
	newRoot := t.TempDir()
	os.Chmod(newRoot, 0o755)
	return testPlanWithRoot(newRoot, iso, uid, workspace, script)
}

func testPlanWithRoot(newRoot, iso string, uid uint32, workspace, script string) *sandboxplan.Plan {
	ops := systemOps()
	ops = append(ops,
		sandboxplan.Op{Kind: sandboxplan.OpMask, Target: "/etc/profile"},
		sandboxplan.Op{Kind: sandboxplan.OpTmpfs, Target: "/dev", Mode: 0o755},
		sandboxplan.Op{Kind: sandboxplan.OpBind, Source: "/dev/null", Target: "/dev/null", NoExec: true, NoSuid: true},
		sandboxplan.Op{Kind: sandboxplan.OpProc, Target: "/proc"},
		sandboxplan.Op{Kind: sandboxplan.OpTmpfs, Target: "/tmp", Mode: 0o1777, Size: "16m"},
		sandboxplan.Op{Kind: sandboxplan.OpBind, Source: workspace, Target: "/workspace", NoSuid: true, NoDev: true, Why: "workspace"},
		sandboxplan.Op{Kind: sandboxplan.OpTmpfs, Target: "/mnt"},
		sandboxplan.Op{Kind: sandboxplan.OpFile, Target: "/mnt/proc/identity", Data: []byte("agent=t\n")},
		sandboxplan.Op{Kind: sandboxplan.OpReadOnly, Target: "/mnt"},
		sandboxplan.Op{Kind: sandboxplan.OpLoopback},
		sandboxplan.Op{Kind: sandboxplan.OpPivotRoot},
		sandboxplan.Op{Kind: sandboxplan.OpReadOnly, Target: "/"},
	)
	return &sandboxplan.Plan{
		Iso:        iso,
		Namespaces: sandboxplan.Namespaces{User: iso == "userns", Mount: true, PID: true, UTS: true, IPC: true, Net: true},
		NewRoot:    newRoot,
		Ops:        ops,
		UID:        uid, GID: uid,
		OuterUID: uint32(os.Getuid()), OuterGID: uint32(os.Getgid()),
		Hostname: "ctx-test",
		Cwd:      "/workspace",
		Env:      []string{"PATH=/usr/bin:/bin", "HOME=/workspace"},
		Argv:     []string{"/bin/sh", "-c", script},
		// The second wall as BuildPlan draws it for perm rwx.
		Access: []sandboxplan.AccessRule{{Path: "/", Exec: true}, {Path: "/dev", Write: true, Dev: true},
			{Path: "/tmp", Write: true, Exec: true}, {Path: "/workspace", Write: true, Exec: true}},
		ExecAll: true,
	}
}

func runPlan(t *testing.T, plan *sandboxplan.Plan) (string, int) {
	t.Helper()
	sb, err := New(plan)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sb.Cmd.Stdout, sb.Cmd.Stderr = &out, &out
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	err = sb.Cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// mountinfo is the host's mount table, less the mounts other tests make
// meanwhile: go test runs packages in parallel, and the root package's
// chroot test mounts /proc and /dev under its scratch directory, its
// agent starts pin user namespaces under the runtime directory. A mount a
// sandbox leaked would be at a host path or under this test's own
// directories (its new root is one), which are all kept.
func mountinfo(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Dir(t.TempDir()) + "/"
	tmp := filepath.Clean(os.TempDir()) + "/"
	var kept []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			at := fsops.UnescapeMountinfo(f[4]) + "/"
			if strings.HasPrefix(at, tmp) && !strings.HasPrefix(at, own) || strings.Contains(at, "/cortexfs/") {
				continue
			}
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "")
}

// The checks every sandbox must pass, printed one per line by the script.
const probeScript = `
echo uid=$(id -u) gid=$(id -g)
grep -E '^(CapInh|CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' '
echo host=$(hostname)
echo pid1=$(cat /proc/1/cmdline | tr '\0' ' ')
touch /usr/ctx-escape 2>/dev/null && echo usr=writable || echo usr=readonly
touch /ctx-root-file 2>/dev/null && echo root=writable || echo root=readonly
{ echo hi > /workspace/made-inside; } 2>/dev/null && echo workspace=writable
echo t > /tmp/x && echo tmp=writable
test -e /root/.bashrc -o -e /home && echo hostpaths=visible || echo hostpaths=hidden
mount -t tmpfs none /tmp 2>/dev/null && echo mount=allowed || echo mount=refused
cat /etc/profile | wc -c | sed 's/^/profile=/'
echo identity=$(cat /mnt/proc/identity)
{ echo x >> /mnt/proc/identity; } 2>/dev/null && echo mnt=writable || echo mnt=readonly
exit 7
`

func checkProbe(t *testing.T, out string, wantUID string) {
	t.Helper()
	for _, want := range []string{
		"uid=" + wantUID + " ",
		"CapInh: 0000000000000000", "CapEff: 0000000000000000", "CapPrm: 0000000000000000", "CapBnd: 0000000000000000", "CapAmb: 0000000000000000",
		"NoNewPrivs: 1",
		"host=ctx-test",
		"usr=readonly", "root=readonly", "workspace=writable", "tmp=writable",
		"hostpaths=hidden", "mount=refused", "profile=0",
		"identity=agent=t", "mnt=readonly",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sandbox output lacks %q:\n%s", want, out)
		}
	}
}

func TestSandboxUserns(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	before := mountinfo(t)
	out, code := runPlan(t, testPlan(t, "userns", 1234, ws, probeScript))
	if code != 7 {
		t.Fatalf("exit %d, want 7 (the program's own status):\n%s", code, out)
	}
	checkProbe(t, out, "1234")
	if b, err := os.ReadFile(filepath.Join(ws, "made-inside")); err != nil || string(b) != "hi\n" {
		t.Errorf("file written in /workspace not on the host: %q %v", b, err)
	}
	if _, err := os.Stat("/usr/ctx-escape"); err == nil {
		os.Remove("/usr/ctx-escape")
		t.Error("the sandbox wrote to the host's /usr")
	}
	if after := mountinfo(t); after != before {
		t.Errorf("host mounts changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestSandboxUsernsRoot runs the agent as uid 0 of its namespace: root's
// execve turns inheritable capabilities into permitted ones, so this is the
// case that proves every capability set is empty.
func TestSandboxUsernsRoot(t *testing.T) {
	requireSandbox(t)
	out, code := runPlan(t, testPlan(t, "userns", 0, t.TempDir(), probeScript))
	if code != 7 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	checkProbe(t, out, "0")
}

func TestSandboxUIDMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("iso=uid needs root")
	}
	requireSandbox(t)
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	before := mountinfo(t)
	out, code := runPlan(t, testPlan(t, "uid", 65534, ws, probeScript))
	if code != 7 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	checkProbe(t, out, "65534")
	if after := mountinfo(t); after != before {
		t.Errorf("host mounts changed")
	}
}

func TestSandboxUIDModeRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("iso=uid needs root")
	}
	requireSandbox(t)
	out, code := runPlan(t, testPlan(t, "uid", 0, t.TempDir(), probeScript))
	if code != 7 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	checkProbe(t, out, "0")
}

// TestSandboxUnprivileged builds a sandbox from an unprivileged uid through
// a user namespace, as a normal user would.
func TestSandboxUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching to an unprivileged uid needs root; as non-root TestSandboxUserns covers it")
	}
	requireSandbox(t)
	// Not t.TempDir: its parent is 0700, out of nobody's reach.
	dir, err := os.MkdirTemp("", "ctx-sandbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o777)
	os.Chmod(ws, 0o777)
	self, _ := os.Executable()
	// The test binary must be reachable by nobody.
	exe := filepath.Join(dir, "sandbox-as-nobody")
	if b, err := os.ReadFile(self); err == nil {
		os.WriteFile(exe, b, 0o755)
	}
	cmd := exec.Command(exe, ws)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("unprivileged sandbox: %v\n%s", err, out)
	}
	checkProbe(t, string(out), "4321")
}

// startAsNobody runs in a re-executed test binary as uid 65534.
func startAsNobody() int {
	ws := os.Args[1]
	newRoot, err := os.MkdirTemp(filepath.Dir(ws), "root")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	sb, err := New(testPlanWithRoot(newRoot, "userns", 4321, ws, probeScript))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	sb.Cmd.Stdout, sb.Cmd.Stderr = os.Stdout, os.Stdout
	if err := sb.Start(); err != nil {
		fmt.Println(err)
		return 1
	}
	sb.Cmd.Wait()
	return sb.Cmd.ProcessState.ExitCode()
}
