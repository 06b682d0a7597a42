package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A Landlock domain cannot be left, so every restriction happens in a
// re-executed test binary (TestLandlockChild) and the parent judges what it
// reports and what it left on disk.
const (
	landlockCaseEnv = "CTX_TEST_LANDLOCK_CASE" // which child case to run
	landlockDirEnv  = "CTX_TEST_LANDLOCK_DIR"  // the parent's scratch tree
	landlockArgEnv  = "CTX_TEST_LANDLOCK_ARG"  // a port, pid or socket name
	landlockReport  = "landlock-report: "
)

// requireLandlock skips, or fails under CTX_REQUIRE_SANDBOX, when the
// kernel has no Landlock.
func requireLandlock(t *testing.T) int {
	t.Helper()
	abi, err := LandlockABI()
	if abi == 0 {
		if os.Getenv("CTX_REQUIRE_SANDBOX") != "" {
			t.Fatalf("Landlock required (CTX_REQUIRE_SANDBOX) but unavailable: %v", err)
		}
		t.Skipf("Landlock unavailable: %v", err)
	}
	return abi
}

// runLandlockChild runs one child case and returns its reports by key.
func runLandlockChild(t *testing.T, name, dir, arg string) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLandlockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), landlockCaseEnv+"="+name, landlockDirEnv+"="+dir, landlockArgEnv+"="+arg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", name, err, out)
	}
	reports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), landlockReport)
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(line, " ")
		reports[k] = v
	}
	if reports["applied"] == "" {
		t.Fatalf("child %s reported nothing:\n%s", name, out)
	}
	t.Logf("child %s: %s", name, reports["applied"])
	return reports
}

// expectReports checks each key's outcome ("ok" or an errno name).
func landlockExpectReports(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
}

func landlockWriteFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func landlockExpectFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if string(b) != want {
		t.Errorf("%s holds %q, want %q", path, b, want)
	}
}

func landlockExpectAbsent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s should not exist (lstat: %v)", path, err)
	}
}

func landlockCopyTrue(t *testing.T, dst string) {
	t.Helper()
	b, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Skipf("no /usr/bin/true to execute: %v", err)
	}
	landlockWriteFile(t, dst, string(b), 0o755)
}

// expectNoAccept fails if the listener has a connection waiting: a connect
// the kernel let through would sit completed in the accept queue.
func landlockExpectNoAccept(t *testing.T, ln net.Listener) {
	t.Helper()
	type deadliner interface{ SetDeadline(time.Time) error }
	ln.(deadliner).SetDeadline(time.Now().Add(300 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Errorf("listener %s accepted a connection from the restricted child", ln.Addr())
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("accept on %s: %v", ln.Addr(), err)
	}
}

func TestLandlockABI(t *testing.T) {
	abi := requireLandlock(t)
	if abi < 1 {
		t.Fatalf("LandlockABI() = %d", abi)
	}
	t.Logf("Landlock ABI %d", abi)
}

func TestLandlockFilesystem(t *testing.T) {
	abi := requireLandlock(t)
	dir := t.TempDir()
	landlockWriteFile(t, filepath.Join(dir, "ro/data"), "read-only data\n", 0o644)
	landlockWriteFile(t, filepath.Join(dir, "rw/a/moved"), "moved\n", 0o644)
	landlockWriteFile(t, filepath.Join(dir, "rw/trunc"), "long content\n", 0o644)
	os.MkdirAll(filepath.Join(dir, "rw/b"), 0o755)
	landlockWriteFile(t, filepath.Join(dir, "outside/secret"), "secret\n", 0o644)
	landlockWriteFile(t, filepath.Join(dir, "files/granted"), "granted\n", 0o644)
	landlockWriteFile(t, filepath.Join(dir, "files/other"), "other\n", 0o644)
	landlockCopyTrue(t, filepath.Join(dir, "exe/true"))
	landlockCopyTrue(t, filepath.Join(dir, "noexe/true"))

	got := runLandlockChild(t, "fs", dir, "")
	if !strings.HasPrefix(got["applied"], fmt.Sprintf("landlock abi=%d fs=enforced ", abi)) {
		t.Errorf("summary %q", got["applied"])
	}
	landlockExpectReports(t, got, map[string]string{
		"read-ro":             "ok",
		"readdir-ro":          "ok",
		"write-ro":            "EACCES",
		"create-ro":           "EACCES",
		"create-rw":           "ok",
		"mkdir-rw":            "ok",
		"rename-across-rw":    "ok",
		"truncate-rw":         "ok",
		"read-outside":        "EACCES",
		"readdir-outside":     "EACCES",
		"write-outside":       "EACCES",
		"create-outside":      "EACCES",
		"write-file-rule":     "ok",
		"write-file-sibling":  "EACCES",
		"create-by-file-rule": "EACCES",
		"exec-with-exec":      "ok",
		"exec-without-exec":   "EACCES",
		"child-reads-ro":      "ok",
		"child-reads-outside": "denied",
	})
	if abi < 3 {
		t.Log("ABI < 3: truncation is not restricted")
	}

	// What the child did, and did not do, on disk.
	landlockExpectFile(t, filepath.Join(dir, "ro/data"), "read-only data\n")
	landlockExpectAbsent(t, filepath.Join(dir, "ro/new"))
	landlockExpectFile(t, filepath.Join(dir, "rw/new"), "written\n")
	landlockExpectFile(t, filepath.Join(dir, "rw/b/moved"), "moved\n")
	landlockExpectAbsent(t, filepath.Join(dir, "rw/a/moved"))
	landlockExpectFile(t, filepath.Join(dir, "rw/trunc"), "")
	landlockExpectFile(t, filepath.Join(dir, "outside/secret"), "secret\n")
	landlockExpectAbsent(t, filepath.Join(dir, "outside/new"))
	landlockExpectAbsent(t, filepath.Join(dir, "outside/by-child"))
	landlockExpectFile(t, filepath.Join(dir, "files/granted"), "changed\n")
	landlockExpectFile(t, filepath.Join(dir, "files/other"), "other\n")
	landlockExpectAbsent(t, filepath.Join(dir, "files/new"))

	// Other threads: restricted with TSYNC, not without (the caller must
	// fork from the restricted thread).
	want := "ok"
	if strings.HasSuffix(got["applied"], " threads=all") {
		want = "EACCES"
	}
	landlockExpectReports(t, got, map[string]string{"other-thread-reads-outside": want})
}

func TestLandlockRuleErrors(t *testing.T) {
	requireLandlock(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "real"), 0o755)
	os.Symlink("real", filepath.Join(dir, "link"))
	got := runLandlockChild(t, "errors", dir, "")
	landlockExpectReports(t, got, map[string]string{
		"relative":              "refused",
		"missing":               "ENOENT",
		"missing-optional":      "ok",
		"symlink":               "ELOOP",
		"symlink-optional":      "ok",
		"symlink-inside":        "ELOOP",
		"symlink-inside-option": "ok",
	})
}

func TestLandlockDenyTCP(t *testing.T) {
	abi := requireLandlock(t)
	if abi < 4 {
		t.Skipf("Landlock ABI %d has no TCP rules (4+)", abi)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	got := runLandlockChild(t, "tcp", t.TempDir(), strconv.Itoa(port))
	if !strings.Contains(got["applied"], " tcp=denied ") {
		t.Errorf("summary %q", got["applied"])
	}
	landlockExpectReports(t, got, map[string]string{
		"connect-tcp": "EACCES",
		"bind-tcp":    "EACCES",
	})
	landlockExpectNoAccept(t, ln)
}

func TestLandlockScope(t *testing.T) {
	abi := requireLandlock(t)
	if abi < 6 {
		t.Skipf("Landlock ABI %d has no scopes (6+)", abi)
	}
	sleep := exec.Command("/usr/bin/sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	exited := make(chan struct{})
	go func() { sleep.Wait(); close(exited) }()
	defer func() { sleep.Process.Kill(); <-exited }()

	name := fmt.Sprintf("@ctx-landlock-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	got := runLandlockChild(t, "scope", t.TempDir(), strconv.Itoa(sleep.Process.Pid)+" "+name)
	if !strings.Contains(got["applied"], " scope=signal,abstract-unix ") {
		t.Errorf("summary %q", got["applied"])
	}
	landlockExpectReports(t, got, map[string]string{
		"kill-outside":     "EPERM",
		"kill-own-child":   "ok",
		"connect-abstract": "EPERM",
	})
	// SIGUSR1 would have ended the sleep: it must still be running.
	select {
	case <-exited:
		t.Errorf("the sleep started outside the domain died: %v", sleep.ProcessState)
	case <-time.After(200 * time.Millisecond):
	}
	landlockExpectNoAccept(t, ln)
}

// TestLandlockChild is the restricted side of the tests above; it does
// nothing unless a parent named a case.
func TestLandlockChild(t *testing.T) {
	name := os.Getenv(landlockCaseEnv)
	if name == "" {
		return
	}
	// The domain belongs to this thread: the operations that must be
	// judged run here, and the children are forked from here.
	runtime.LockOSThread()
	dir, arg := os.Getenv(landlockDirEnv), os.Getenv(landlockArgEnv)
	switch name {
	case "fs":
		landlockChildFS(t, dir)
	case "errors":
		landlockChildErrors(t, dir)
	case "tcp":
		landlockChildTCP(t, arg)
	case "tcp-port":
		landlockChildTCPPort(t, arg)
	case "scope":
		landlockChildScope(t, arg)
	default:
		t.Fatalf("unknown case %q", name)
	}
}

func landlockResult(key string, err error) {
	fmt.Printf("%s%s %s\n", landlockReport, key, landlockOutcome(err))
}

func landlockOutcome(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return "error:" + strings.ReplaceAll(err.Error(), " ", "_")
}

func landlockApplyInChild(t *testing.T, p LandlockPolicy) {
	abi, summary, err := ApplyLandlock(p)
	if err != nil || abi == 0 {
		t.Fatalf("ApplyLandlock: abi %d %q: %v", abi, summary, err)
	}
	fmt.Printf("%sapplied %s\n", landlockReport, summary)
}

func landlockChildFS(t *testing.T, dir string) {
	at := func(p string) string { return filepath.Join(dir, p) }
	landlockApplyInChild(t, LandlockPolicy{Rules: []LandlockRule{
		{Path: at("ro")},
		{Path: at("rw"), Write: true},
		{Path: at("exe"), Exec: true},
		{Path: at("noexe")},
		// A file rule: the directory rights Write brings are dropped.
		{Path: at("files/granted"), Write: true},
		{Path: at("missing"), Write: true, Optional: true},
		// The dynamic loader, libc, sh and cat.
		{Path: "/usr", Exec: true},
		// os/exec gives children /dev/null for unset stdio. A device file
		// rule: only file rights are kept.
		{Path: "/dev/null", Write: true},
		// A symlink on merged-/usr systems: skipped, /usr covers it.
		{Path: "/lib64", Exec: true, Optional: true},
	}})

	b, err := os.ReadFile(at("ro/data"))
	if err == nil && string(b) != "read-only data\n" {
		err = fmt.Errorf("read %q", b)
	}
	landlockResult("read-ro", err)
	_, err = os.ReadDir(at("ro"))
	landlockResult("readdir-ro", err)
	f, err := os.OpenFile(at("ro/data"), os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		f.WriteString("appended\n")
		f.Close()
	}
	landlockResult("write-ro", err)
	landlockResult("create-ro", os.WriteFile(at("ro/new"), []byte("x"), 0o644))

	landlockResult("create-rw", os.WriteFile(at("rw/new"), []byte("written\n"), 0o644))
	landlockResult("mkdir-rw", os.Mkdir(at("rw/sub"), 0o755))
	landlockResult("rename-across-rw", os.Rename(at("rw/a/moved"), at("rw/b/moved")))
	f, err = os.OpenFile(at("rw/trunc"), os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		f.Close()
	}
	landlockResult("truncate-rw", err)

	_, err = os.ReadFile(at("outside/secret"))
	landlockResult("read-outside", err)
	_, err = os.ReadDir(at("outside"))
	landlockResult("readdir-outside", err)
	f, err = os.OpenFile(at("outside/secret"), os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		f.Close()
	}
	landlockResult("write-outside", err)
	landlockResult("create-outside", os.WriteFile(at("outside/new"), []byte("x"), 0o644))

	f, err = os.OpenFile(at("files/granted"), os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.WriteString("changed\n")
		f.Close()
	}
	landlockResult("write-file-rule", err)
	f, err = os.OpenFile(at("files/other"), os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		f.Close()
	}
	landlockResult("write-file-sibling", err)
	landlockResult("create-by-file-rule", os.WriteFile(at("files/new"), []byte("x"), 0o644))

	landlockResult("exec-with-exec", exec.Command(at("exe/true")).Run())
	landlockResult("exec-without-exec", exec.Command(at("noexe/true")).Run())

	// Processes forked from this thread inherit the domain.
	out, err := exec.Command("/usr/bin/sh", "-c", "cat "+at("ro/data")).Output()
	if err == nil && string(out) != "read-only data\n" {
		err = fmt.Errorf("child read %q", out)
	}
	landlockResult("child-reads-ro", err)
	out, err = exec.Command("/usr/bin/sh", "-c", "cat "+at("outside/secret")+"; echo made > "+at("outside/by-child")).Output()
	verdict := "denied"
	if err == nil || strings.Contains(string(out), "secret") {
		verdict = fmt.Sprintf("leaked:%q:%v", out, err)
	}
	fmt.Printf("%schild-reads-outside %s\n", landlockReport, verdict)

	// Another goroutine runs on another thread: restricted only with TSYNC.
	done := make(chan error)
	go func() {
		_, err := os.ReadFile(at("outside/secret"))
		done <- err
	}()
	landlockResult("other-thread-reads-outside", <-done)
}

func landlockChildErrors(t *testing.T, dir string) {
	try := func(key string, r LandlockRule) {
		_, _, err := ApplyLandlock(LandlockPolicy{Rules: []LandlockRule{r}})
		if err == nil {
			// Accepted: this thread is now restricted, and each later
			// accepted case stacks one more layer, which is harmless.
			landlockResult(key, nil)
			return
		}
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			fmt.Printf("%s%s refused\n", landlockReport, key)
			return
		}
		landlockResult(key, err)
	}
	fmt.Printf("%sapplied errors\n", landlockReport)
	try("relative", LandlockRule{Path: "relative/path"})
	try("missing", LandlockRule{Path: filepath.Join(dir, "missing")})
	try("symlink", LandlockRule{Path: filepath.Join(dir, "link")})
	try("symlink-inside", LandlockRule{Path: filepath.Join(dir, "link", "x")})
	// Accepted rules restrict this thread: run them last.
	try("missing-optional", LandlockRule{Path: filepath.Join(dir, "missing"), Optional: true})
	try("symlink-optional", LandlockRule{Path: filepath.Join(dir, "link"), Optional: true})
	try("symlink-inside-option", LandlockRule{Path: filepath.Join(dir, "link", "x"), Optional: true})
}

func landlockChildTCP(t *testing.T, arg string) {
	port, err := strconv.Atoi(arg)
	if err != nil {
		t.Fatal(err)
	}
	landlockApplyInChild(t, LandlockPolicy{DenyTCP: true})
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	landlockResult("connect-tcp", unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}))
	unix.Close(fd)
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	landlockResult("bind-tcp", unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	unix.Close(fd)
}

func landlockChildScope(t *testing.T, arg string) {
	pidText, socket, _ := strings.Cut(arg, " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		t.Fatal(err)
	}
	landlockApplyInChild(t, LandlockPolicy{Scope: true, Rules: []LandlockRule{{Path: "/usr", Exec: true}, {Path: "/dev/null", Write: true}}})
	landlockResult("kill-outside", unix.Kill(pid, unix.SIGUSR1))

	// A process forked from this thread is inside the domain.
	own := exec.Command("/usr/bin/sleep", "30")
	own.Stdout, own.Stderr = io.Discard, io.Discard
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	landlockResult("kill-own-child", unix.Kill(own.Process.Pid, unix.SIGKILL))
	own.Wait()

	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	landlockResult("connect-abstract", unix.Connect(fd, &unix.SockaddrUnix{Name: socket}))
	unix.Close(fd)
}
