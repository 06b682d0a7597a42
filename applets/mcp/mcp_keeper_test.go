package mcp

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// These tests run the real ctx binary's projected tools against the
// fixture server (testdata/mcpserver) in a stand-in for an iso landlock
// run: CTX_RUN_DIR names a directory with a run identity, HOME/tmp is the
// run's TMPDIR. Nothing reaps the keeper here as a run's init would: it
// ends itself once the identity is gone (the tests remove it).

// warmBinaries is binaries for a test or a benchmark: the same build.
func warmBinaries(tb testing.TB) string {
	if t, ok := tb.(*testing.T); ok {
		return binaries(t)
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ctx-applets-test-")
		if err != nil {
			buildErr = err
			return
		}
		for _, b := range [][]string{{"..", "build", "-buildvcs=false", "-o", dir + "/ctx", "."},
			{"../../testdata/mcpserver", "build", "-buildvcs=false", "-o", dir + "/", "./server", "./client"}} {
			cmd := exec.Command(goTool(), b[1:]...)
			cmd.Dir = b[0]
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go %v in %s: %v\n%s", b[1:], b[0], err, out)
				return
			}
		}
		buildDir = dir
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return buildDir
}

// fakeRun is a stand-in run: its environment for a tool, and its end.
type fakeRun struct {
	id, identity string
	env          []string
}

func newFakeRun(tb testing.TB, work string) *fakeRun {
	tb.Helper()
	runDir := filepath.Join(work, "run-"+strconv.Itoa(int(time.Now().UnixNano()%1e9)))
	home := filepath.Join(runDir, "home")
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
		tb.Fatal(err)
	}
	id := policy.Identity{Agent: "coder", Label: "user_u:agent_r:coder_t:s0", Subject: "coder_t", UID: 0, GID: 0,
		Session: "default", Run: fsops.NewRunID(), SOP: "/mnt/SOP",
		SOPSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
	r := &fakeRun{id: id.Run, identity: filepath.Join(runDir, "identity"),
		env: []string{"CTX_RUN_DIR=" + runDir, "HOME=" + home}}
	if err := os.WriteFile(r.identity, id.Format(), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.end)
	return r
}

// end ends the run as far as its keepers can tell: the identity goes.
func (r *fakeRun) end() { os.Remove(r.identity) }

// keeperPids are the pids of the run's keepers.
func (r *fakeRun) keeperPids() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if args := strings.Split(string(b), "\x00"); len(args) >= 3 && args[0] == McpKeeperApplet && args[2] == r.id {
			pids = append(pids, pid)
		}
	}
	return pids
}

func serverPids(t *testing.T, file string) []int {
	t.Helper()
	b, _ := os.ReadFile(file)
	var pids []int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if p, ok := strings.CutPrefix(l, "server "); ok {
			n, _ := strconv.Atoi(p)
			pids = append(pids, n)
		}
	}
	return pids
}

// waitGone waits until none of pids exists, or fails.
func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range pids {
		for {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s %d still exists", what, pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// warmSetup projects and installs the fixture's good.echo, rich.slow and
// rich.rich, each server recording its pid in pids (and rich its calls'
// fates in events).
func warmSetup(tb testing.TB) (bin, work, tools, pids, events string) {
	bin = warmBinaries(tb)
	work = tb.TempDir()
	root := filepath.Join(work, "root")
	os.MkdirAll(filepath.Join(root, "tool"), 0o755)
	pids, events = filepath.Join(work, "pids"), filepath.Join(work, "events")
	cfg := filepath.Join(work, "mcp.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"mcpServers":{"good":{"command":%q,"args":["good"],"env":{"FIXTURE_PIDS":%q}},"rich":{"command":%q,"args":["rich"],"env":{"FIXTURE_PIDS":%q,"FIXTURE_EVENTS":%q}}}}`,
		bin+"/server", pids, bin+"/server", pids, events)), 0o644); err != nil {
		tb.Fatal(err)
	}
	for _, p := range []struct{ server, tool string }{{"good", "echo"}, {"rich", "slow"}, {"rich", "rich"}} {
		out := filepath.Join(work, "m-"+p.server)
		if _, err := os.Stat(out); err != nil {
			cmd := exec.Command(bin+"/ctx", "ctxmcp", "project", "--config", cfg, "--runtime-config", cfg, "--server", p.server, "--out", out)
			if b, err := cmd.CombinedOutput(); err != nil {
				tb.Fatalf("project: %v %s", err, b)
			}
		}
		cmd := exec.Command(bin+"/ctx", "object", "install", "--root", root, "--tier", "system", filepath.Join(out, p.server+"."+p.tool+".manifest.json"))
		if b, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("install: %v %s", err, b)
		}
	}
	os.Remove(pids) // the listings' servers
	return bin, work, filepath.Join(root, "tool"), pids, events
}

func execTool(t *testing.T, dir string, env []string, tool string, args ...string) (string, string, int) {
	t.Helper()
	return run(t, dir, env, append([]string{tool}, args...)...)
}

// In a run: N calls, one server; a server killed between calls, or its
// keeper killed, is started again by the next call; two first calls at
// once start one keeper; a socket that is not a keeper of ours is not
// used; when the run ends, the keeper and the server end. Outside a run
// every call starts the server.
func TestProjectedToolWarm(t *testing.T) {
	_, work, tools, pids, _ := warmSetup(t)
	echo := filepath.Join(tools, "good.echo")

	for i := 0; i < 3; i++ {
		if out, errOut, code := execTool(t, work, nil, echo, `{"message":"cold"}`); code != 0 || out != "Echo: cold\n{\"echoed\":\"cold\"}\n" {
			t.Fatalf("cold call: %d %q %q", code, out, errOut)
		}
	}
	if n := len(serverPids(t, pids)); n != 3 {
		t.Fatalf("outside a run 3 calls started the server %d times", n)
	}
	waitGone(t, "cold server", serverPids(t, pids)...)
	os.Remove(pids)

	r := newFakeRun(t, work)
	for i := 0; i < 5; i++ {
		if out, errOut, code := execTool(t, work, r.env, echo, `{"message":"warm`+strconv.Itoa(i)+`"}`); code != 0 || !strings.HasPrefix(out, "Echo: warm"+strconv.Itoa(i)+"\n") {
			t.Fatalf("warm call %d: %d %q %q", i, code, out, errOut)
		}
	}
	if got := serverPids(t, pids); len(got) != 1 {
		t.Fatalf("5 calls in a run started the server %d times", len(got))
	}
	keepers := r.keeperPids()
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}

	// The server killed between calls: the next call starts it again.
	first := serverPids(t, pids)[0]
	syscall.Kill(first, syscall.SIGKILL)
	waitGone(t, "killed server", first)
	if out, errOut, code := execTool(t, work, r.env, echo, `{"message":"again"}`); code != 0 || !strings.HasPrefix(out, "Echo: again\n") {
		t.Fatalf("after the server's kill: %d %q %q", code, out, errOut)
	}
	if got := serverPids(t, pids); len(got) != 2 {
		t.Fatalf("server started %d times, want 2", len(got))
	}

	// The keeper killed: its socket is stale; the next call starts a new
	// keeper (and server: the old one died with its keeper).
	syscall.Kill(keepers[0], syscall.SIGKILL)
	waitGone(t, "killed keeper", keepers[0])
	waitGone(t, "the killed keeper's server", serverPids(t, pids)[1])
	if out, errOut, code := execTool(t, work, r.env, echo, `{"message":"new keeper"}`); code != 0 || !strings.HasPrefix(out, "Echo: new keeper\n") {
		t.Fatalf("after the keeper's kill: %d %q %q", code, out, errOut)
	}
	if got := serverPids(t, pids); len(got) != 3 {
		t.Fatalf("server started %d times, want 3", len(got))
	}
	keepers = r.keeperPids()
	if len(keepers) != 1 {
		t.Fatalf("keepers %v, want one", keepers)
	}

	// A listener of our uid at the keeper's socket that is no keeper of
	// this server is not used: the call replaces it with a keeper.
	socks, _ := filepath.Glob(filepath.Join(filepath.Dir(r.identity), "home", "tmp", "ctx-mcp-*", "*.sock"))
	if len(socks) != 1 {
		t.Fatalf("sockets %v", socks)
	}
	syscall.Kill(keepers[0], syscall.SIGKILL)
	waitGone(t, "killed keeper", keepers[0])
	os.Remove(socks[0])
	impostor, err := fsops.ListenUnix(socks[0])
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	var fooled sync.WaitGroup
	fooled.Add(1)
	go func() {
		defer fooled.Done()
		c, err := impostor.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(c, `{"keeper":1,"server":"good","entry":"%s","cwd":%q,"pid":1}`+"\n", strings.Repeat("0", 64), work)
		io.Copy(io.Discard, c)
		c.Close()
	}()
	if out, errOut, code := execTool(t, work, r.env, echo, `{"message":"not fooled"}`); code != 0 || !strings.HasPrefix(out, "Echo: not fooled\n") {
		t.Fatalf("with an impostor: %d %q %q", code, out, errOut)
	}
	impostor.Close()
	fooled.Wait()
	if got := r.keeperPids(); len(got) != 1 {
		t.Fatalf("keepers %v, want a new one", got)
	}

	// The run ends: its keeper ends, and its server.
	keepers = r.keeperPids()
	all := serverPids(t, pids)
	r.end()
	waitGone(t, "keeper", keepers...)
	waitGone(t, "server", all...)

	// Two first calls of a run at once: one keeper, one server.
	os.Remove(pids)
	r2 := newFakeRun(t, work)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := exec.Command(echo, `{"message":"at once"}`)
			cmd.Dir, cmd.Env = work, append([]string{"PATH=/usr/bin:/bin"}, r2.env...)
			if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "Echo: at once\n") {
				t.Errorf("concurrent call %d: %v %q", i, err, out)
			}
		}(i)
	}
	wg.Wait()
	if got := serverPids(t, pids); len(got) != 1 {
		t.Fatalf("4 first calls at once started the server %d times", len(got))
	}
	if got := r2.keeperPids(); len(got) != 1 {
		t.Fatalf("keepers %v, want one", got)
	}
	keepers, all = r2.keeperPids(), serverPids(t, pids)
	r2.end()
	waitGone(t, "keeper", keepers...)
	waitGone(t, "server", all...)
}

// A cancelled call (the tool told to terminate, as ctxmcp serve and the
// broker do) reaches the server as notifications/cancelled, and the
// shared server answers the next call; progress comes through the keeper.
func TestProjectedToolWarmCancel(t *testing.T) {
	_, work, tools, pids, events := warmSetup(t)
	r := newFakeRun(t, work)
	cmd := exec.Command(filepath.Join(tools, "rich.slow"), `{}`)
	cmd.Dir = work
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "CTX_TOOL_MODE=native", "CTX_TOOL_PROGRESS=1", "CTX_RUN_ID=r9"}, r.env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var frames []string
	for sc.Scan() {
		frames = append(frames, sc.Text())
		if strings.Contains(sc.Text(), `"message":"step 2"`) {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
		frames = append(frames, sc.Text())
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+15 {
		t.Fatalf("cancelled call: %v, frames %q", err, frames)
	}
	got := strings.Join(frames, "\n")
	if !strings.Contains(got, `{"type":"progress","run":"r9","message":"step 1","progress":1,"total":3}`) || !strings.Contains(got, `"code":"ECANCELED"`) {
		t.Fatalf("frames:\n%s", got)
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
	out, errOut, code := execTool(t, work, r.env, filepath.Join(tools, "rich.rich"))
	if code != 0 || !strings.HasPrefix(out, "rich result\n[image: image/png") {
		t.Fatalf("the next call: %d %q %q", code, out, errOut)
	}
	if got := serverPids(t, pids); len(got) != 1 {
		t.Fatalf("server started %d times, want once", len(got))
	}
	keepers := r.keeperPids()
	r.end()
	waitGone(t, "keeper", keepers...)
	waitGone(t, "server", serverPids(t, pids)...)
}

// nodeServer is a minimal MCP stdio server in plain Node.js (no SDK): an
// interpreter's start-up, as most published MCP servers have.
const nodeServer = `const rl = require("readline").createInterface({input: process.stdin});
rl.on("line", (line) => {
  let m;
  try { m = JSON.parse(line); } catch (e) { return; }
  const reply = (result) => process.stdout.write(JSON.stringify({jsonrpc: "2.0", id: m.id, result}) + "\n");
  if (m.method === "initialize") reply({protocolVersion: "2025-06-18", capabilities: {tools: {}}, serverInfo: {name: "node", version: "1"}});
  else if (m.method === "tools/list") reply({tools: [{name: "echo", inputSchema: {type: "object"}}]});
  else if (m.method === "tools/call") reply({content: [{type: "text", text: "Echo: " + m.params.arguments.message}]});
});
`

// BenchmarkProjectedToolCall measures one call of a projected tool, cold
// (outside a run: it starts the server, initializes, calls, ends it) and
// warm (the 2nd..Nth call in a run: through the run's keeper, the server
// already up), against the fixture server (good.echo, a Go binary) and,
// where node is installed, a plain Node.js server (node.echo):
//
//	SERVER/process/*  the tool executed as a process, as a call is
//	SERVER/inproc/*   the tool's applet run in this process: the same
//	                  work without the ctx binary's exec and start-up,
//	                  which every call pays alike
//
// Each warm line reports its ratio to the cold line before it as
// cold/warm. (mcpstdio's BenchmarkProjectedCall measures the MCP side
// alone: a session's start and end against one call through a keeper.)
func BenchmarkProjectedToolCall(b *testing.B) {
	bin, work, tools, _, _ := warmSetup(b)
	servers := []string{"good"}
	if node, err := exec.LookPath("node"); err == nil {
		js := filepath.Join(work, "server.js")
		cfg := filepath.Join(work, "node.json")
		os.WriteFile(js, []byte(nodeServer), 0o644)
		os.WriteFile(cfg, []byte(fmt.Sprintf(`{"mcpServers":{"node":{"command":%q,"args":[%q]}}}`, node, js)), 0o644)
		out := filepath.Join(work, "m-node")
		for _, argv := range [][]string{{"ctxmcp", "project", "--config", cfg, "--runtime-config", cfg, "--server", "node", "--out", out},
			{"object", "install", "--root", filepath.Dir(tools), "--tier", "system", filepath.Join(out, "node.echo.manifest.json")}} {
			if b2, err := exec.Command(bin+"/ctx", argv...).CombinedOutput(); err != nil {
				b.Fatalf("%v: %v %s", argv, err, b2)
			}
		}
		servers = append(servers, "node")
	}
	keeperExecutable = bin + "/ctx"
	defer func() { keeperExecutable = "" }()
	wd, _ := os.Getwd()
	os.Chdir(work) // the in-process tool's directory: the keeper's key
	defer os.Chdir(wd)
	for _, server := range servers {
		echo := filepath.Join(tools, server+".echo")
		ctl := echo + ".d"
		loc, err := fsops.ReadControl(filepath.Join(ctl, "mcp"))
		if err != nil {
			b.Fatal(err)
		}
		exe := func(env []string) func(b *testing.B) {
			return func(b *testing.B) {
				cmd := exec.Command(echo, `{"message":"bench"}`)
				cmd.Dir, cmd.Env = work, append([]string{"PATH=/usr/bin:/bin"}, env...)
				if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "Echo: bench") {
					b.Fatalf("%v %s", err, out)
				}
			}
		}
		inproc := func(env []string) func(b *testing.B) {
			vars := map[string]string{}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				vars[k] = v
			}
			return func(b *testing.B) {
				var out, errOut strings.Builder
				e := &cli.Env{Name: server + ".echo", Argv0: echo, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
					Getenv: func(k string) string { return vars[k] }, Vars: env}
				if code := runProjectedTool(e, ctl, loc, []string{`{"message":"bench"}`}); code != 0 || !strings.HasPrefix(out.String(), "Echo: bench") {
					b.Fatalf("exit %d: %q %q", code, out.String(), errOut.String())
				}
			}
		}
		for _, kind := range []struct {
			name string
			call func([]string) func(*testing.B)
		}{{"process", exe}, {"inproc", inproc}} {
			var coldNs float64
			b.Run(server+"/"+kind.name+"/cold", func(b *testing.B) {
				call := kind.call(nil)
				for i := 0; i < b.N; i++ {
					call(b)
				}
				coldNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(coldNs/1e6, "ms/call")
			})
			b.Run(server+"/"+kind.name+"/warm", func(b *testing.B) {
				r := newFakeRun(b, work)
				call := kind.call(r.env)
				call(b) // the run's first call starts the keeper and the server
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					call(b)
				}
				b.StopTimer()
				warm := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(warm/1e6, "ms/call")
				if coldNs > 0 {
					b.ReportMetric(coldNs/warm, "cold/warm")
				}
				r.end()
			})
		}
	}
}
