package mcpstdio

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startKeeper serves spec from a keeper in this process on a socket in a
// temporary directory; the keeper is closed when the test ends.
func startKeeper(t testing.TB, spec KeeperSpec) (*Keeper, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "k.sock")
	ln, err := ListenKeeper(sock)
	if err != nil {
		t.Fatal(err)
	}
	k := NewKeeper(spec, Options{})
	served := make(chan struct{})
	go func() {
		k.Serve(ln)
		close(served)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-served
		k.Close()
	})
	return k, sock
}

func callKeeper(t *testing.T, sock string, spec KeeperSpec, tool, args string) *CallResult {
	t.Helper()
	kc, err := DialKeeper(sock, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	res, err := kc.Call(context.Background(), tool, json.RawMessage(args), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func serverStarts(t *testing.T, pidFile string) []int {
	t.Helper()
	b, _ := os.ReadFile(pidFile)
	var pids []int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if pid, ok := strings.CutPrefix(l, "server "); ok {
			n, _ := strconv.Atoi(pid)
			pids = append(pids, n)
		}
	}
	return pids
}

// Many calls, some at once, share one server; a server killed between
// calls is started again by the next call, which succeeds; closing the
// keeper ends the server.
func TestKeeperSharesAndRestarts(t *testing.T) {
	srv, pids := fixtureServer(t, "good")
	spec := KeeperSpec{Name: "good", Server: srv, Cwd: t.TempDir()}
	k, sock := startKeeper(t, spec)
	for i := 0; i < 5; i++ {
		res := callKeeper(t, sock, spec, "echo", `{"message":"m`+strconv.Itoa(i)+`"}`)
		if len(res.Content) != 1 || !strings.Contains(string(res.Content[0]), "Echo: m"+strconv.Itoa(i)) || string(res.Structured) != `{"echoed":"m`+strconv.Itoa(i)+`"}` {
			t.Fatalf("call %d: %s %s", i, res.Content, res.Structured)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kc, err := DialKeeper(sock, spec)
			if err != nil {
				t.Error(err)
				return
			}
			defer kc.Close()
			if _, err := kc.Call(context.Background(), "add", json.RawMessage(`{"a":1,"b":2}`), nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := serverStarts(t, pids); len(got) != 1 || k.Starts() != 1 {
		t.Fatalf("server started %d times (%v), want once", k.Starts(), got)
	}
	first := serverStarts(t, pids)[0]
	syscall.Kill(first, syscall.SIGKILL)
	// Between calls: the next call comes once the server is dead and
	// reaped (the keeper saw it die).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(first)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed server %d was not reaped", first)
		}
	}
	res := callKeeper(t, sock, spec, "echo", `{"message":"again"}`)
	if !strings.Contains(string(res.Content[0]), "Echo: again") {
		t.Fatalf("after the kill: %s", res.Content)
	}
	got := serverStarts(t, pids)
	if len(got) != 2 || k.Starts() != 2 {
		t.Fatalf("server started %d times (%v), want twice", k.Starts(), got)
	}
	k.Close()
	assertGone(t, pids, "server")
}

// A cancelled call reaches the server as notifications/cancelled for that
// call, and the shared server serves the next call.
func TestKeeperCancelKeepsServer(t *testing.T) {
	srv, pids := fixtureServer(t, "rich")
	events := filepath.Join(t.TempDir(), "events")
	srv.Env["FIXTURE_EVENTS"] = events
	spec := KeeperSpec{Name: "rich", Server: srv, Cwd: t.TempDir()}
	k, sock := startKeeper(t, spec)
	kc, err := DialKeeper(sock, spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	progressed := make(chan Progress, 4)
	go func() {
		<-progressed
		<-progressed
		cancel()
	}()
	_, err = kc.Call(ctx, "slow", nil, func(p Progress) { progressed <- p })
	kc.Close()
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("slow: %v, want cancelled", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(events)
		if strings.Contains(string(b), "cancelled 2 the caller cancelled the call") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server recorded no cancel: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res := callKeeper(t, sock, spec, "rich", `{}`)
	if len(res.Content) != 6 || string(res.Structured) != `{"items":["a","b"],"sum":3}` {
		t.Fatalf("rich after the cancel: %s %s", res.Content, res.Structured)
	}
	if k.Starts() != 1 || len(serverStarts(t, pids)) != 1 {
		t.Fatalf("server started %d times, want once", k.Starts())
	}
}

// A caller gone mid-call cancels its call, not the server.
func TestKeeperCallerGoneCancels(t *testing.T) {
	srv, _ := fixtureServer(t, "rich")
	events := filepath.Join(t.TempDir(), "events")
	srv.Env["FIXTURE_EVENTS"] = events
	spec := KeeperSpec{Name: "rich", Server: srv, Cwd: t.TempDir()}
	k, sock := startKeeper(t, spec)
	kc, err := DialKeeper(sock, spec)
	if err != nil {
		t.Fatal(err)
	}
	progressed := make(chan struct{}, 4)
	go kc.Call(context.Background(), "slow", nil, func(Progress) { progressed <- struct{}{} })
	<-progressed
	kc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(events)
		if strings.Contains(string(b), "cancelled 2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server recorded no cancel: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	callKeeper(t, sock, spec, "fail", `{}`)
	if k.Starts() != 1 {
		t.Fatalf("server started %d times, want once", k.Starts())
	}
}

// A keeper of another entry or directory is refused; errors of the server
// come through with the server's words.
func TestKeeperRefusesOtherEntry(t *testing.T) {
	srv, _ := fixtureServer(t, "good")
	spec := KeeperSpec{Name: "good", Server: srv, Cwd: t.TempDir()}
	_, sock := startKeeper(t, spec)
	other := spec
	other.Server.Args = []string{"iserror"}
	if _, err := DialKeeper(sock, other); err == nil || !strings.Contains(err.Error(), "keeps another server") {
		t.Fatalf("another entry: %v", err)
	}
	elsewhere := spec
	elsewhere.Cwd = "/"
	if _, err := DialKeeper(sock, elsewhere); err == nil {
		t.Fatal("another directory was accepted")
	}
	if _, err := DialKeeper(filepath.Join(t.TempDir(), "none.sock"), spec); err == nil {
		t.Fatal("a missing socket was dialed")
	}
	// A caller that does not descend from the keeper's Ancestor (the
	// run's init) is not served.
	sleeper := exec.Command("/bin/sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Wait()
	defer sleeper.Process.Kill()
	k2, sock2 := startKeeper(t, spec)
	k2.Ancestor = sleeper.Process.Pid
	if _, err := DialKeeper(sock2, spec); err == nil || !strings.Contains(err.Error(), "no hello") {
		t.Fatalf("a caller outside the run: %v", err)
	}
	k2.Ancestor = os.Getppid()
	callKeeper(t, sock2, spec, "echo", `{"message":"from the run"}`)

	bad := KeeperSpec{Name: "bad", Server: ServerConfig{Command: "/nonexistent/server"}, Cwd: spec.Cwd}
	_, badSock := startKeeper(t, bad)
	kc, err := DialKeeper(badSock, bad)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	_, err = kc.Call(context.Background(), "x", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "server bad: start:") {
		t.Fatalf("a server that cannot start: %v", err)
	}
}

// A socket path longer than a socket address holds is bound and dialed
// through its directory's descriptor.
func TestKeeperLongSocketPath(t *testing.T) {
	dir := t.TempDir()
	for len(dir) < 150 {
		dir = filepath.Join(dir, "a-rather-long-directory-name")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	srv, _ := fixtureServer(t, "good")
	spec := KeeperSpec{Name: "good", Server: srv, Cwd: dir}
	sock := filepath.Join(dir, "k.sock")
	ln, err := ListenKeeper(sock)
	if err != nil {
		t.Fatal(err)
	}
	k := NewKeeper(spec, Options{})
	go k.Serve(ln)
	defer func() {
		ln.Close()
		k.Close()
	}()
	res := callKeeper(t, sock, spec, "echo", `{"message":"long"}`)
	if !strings.Contains(string(res.Content[0]), "Echo: long") {
		t.Fatalf("%s", res.Content)
	}
}

// BenchmarkProjectedCall compares what a projected tool does per call
// against the fixture server: cold, start the server, initialize, call and
// end it (today's call outside a run); warm, one call through the run's
// keeper, whose server is already up (the 2nd..Nth call in a run). The
// ratio is reported as cold/warm on the warm line.
func BenchmarkProjectedCall(b *testing.B) {
	srv, _ := fixtureServer(b, "good")
	args := json.RawMessage(`{"message":"bench"}`)
	var coldNs float64
	b.Run("cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c, err := Start("good", srv, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.CallTool("echo", args); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
		coldNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("warm", func(b *testing.B) {
		spec := KeeperSpec{Name: "good", Server: srv, Cwd: b.TempDir()}
		_, sock := startKeeper(b, spec)
		warmCall := func() {
			kc, err := DialKeeper(sock, spec)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := kc.Call(context.Background(), "echo", args, nil); err != nil {
				b.Fatal(err)
			}
			kc.Close()
		}
		warmCall() // the first call of the run starts the server
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			warmCall()
		}
		b.StopTimer()
		if warm := float64(b.Elapsed().Nanoseconds()) / float64(b.N); coldNs > 0 && warm > 0 {
			b.ReportMetric(coldNs/warm, "cold/warm")
		}
	})
}

// Starts is how many times the keeper has started its server.
func (k *Keeper) Starts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.starts
}
