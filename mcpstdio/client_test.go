package mcpstdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestClientSDKServer(t *testing.T) {
	srv, pids := fixtureServer(t, "sdk")
	c, err := Start("gosdk", srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.protocol != "2025-11-25" {
		t.Errorf("protocol %q", c.protocol)
	}
	tools, err := c.ListTools()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if fmt.Sprint(names) != "[fail greet picture slow]" {
		t.Fatalf("tools %v", names)
	}
	for _, tl := range tools {
		if tl.Name == "picture" && (tl.Title != "Picture" || !strings.Contains(string(tl.Annotations), `"readOnlyHint":true`) || !strings.Contains(string(tl.OutputSchema), `"width"`)) {
			t.Errorf("picture listed as %+v", tl)
		}
	}
	res, err := c.CallTool("greet", json.RawMessage(`{"name":"ctx"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 || !strings.Contains(string(res.Content[0]), `Hi ctx`) || string(res.Structured) != `{"greeting":"Hi ctx"}` {
		t.Fatalf("greet: %+v %s %s", res, res.Content, res.Structured)
	}
	res, err = c.CallTool("fail", nil)
	if err != nil || !res.IsError {
		t.Fatalf("fail: %+v %v", res, err)
	}
	c.Close()
	assertGone(t, pids, "server")
}

// The SDK server narrowed to older versions negotiates down; each stable
// version is accepted.
func TestClientDowngrade(t *testing.T) {
	for _, versions := range [][]string{{"2024-11-05"}, {"2025-03-26", "2024-11-05"}, {"2025-06-18"}} {
		srv, pids := fixtureServer(t, append([]string{"sdk"}, versions...)...)
		c, err := Start("gosdk", srv, Options{})
		if err != nil {
			t.Fatalf("%v: %v", versions, err)
		}
		if c.protocol != versions[0] {
			t.Errorf("%v: negotiated %q", versions, c.protocol)
		}
		if _, err := c.ListTools(); err != nil {
			t.Errorf("%v: %v", versions, err)
		}
		c.Close()
		assertGone(t, pids, "server")
	}
}

// Every handshake failure leaves no process behind.
func TestClientRefusesHandshake(t *testing.T) {
	tests := []struct{ mode, want string }{
		{"version:2099-01-01", `negotiated protocol version "2099-01-01" is not supported`},
		{"version:2024-10-07", `"2024-10-07" is not supported`},
		{"version:2026-07-28", `"2026-07-28" is not supported`},
		{"version:", `"" is not supported`},
		{"nocaps", "capabilities.tools is not an object"},
		{"toolsnull", "capabilities.tools is not an object"},
		{"garbage", "malformed JSON-RPC frame"},
		{"oversized", "frame exceeds 1048576 bytes"},
		{"grandcrash", ""}, // handshake is fine; see TestClientCrashMidCall
	}
	for _, tc := range tests {
		if tc.want == "" {
			continue
		}
		t.Run(tc.mode, func(t *testing.T) {
			srv, pids := fixtureServer(t, tc.mode)
			c, err := Start("fake", srv, Options{RequestTimeout: 5 * time.Second})
			if err == nil {
				c.Close()
				t.Fatal("Start succeeded")
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Op != "initialize" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want initialize error containing %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "server fake: initialize: ") {
				t.Fatalf("error does not name server and step: %v", err)
			}
			assertGone(t, pids, "server")
		})
	}
}

// Progress notifications reach the caller of the call that asked for
// them; cancelling the call tells the server, which stops it (the server's
// own record says so); the session goes on.
func TestClientProgressAndCancel(t *testing.T) {
	for _, mode := range []string{"rich", "sdk"} {
		t.Run(mode, func(t *testing.T) {
			srv, pids := fixtureServer(t, mode)
			events := filepath.Join(t.TempDir(), "events")
			srv.Env["FIXTURE_EVENTS"] = events
			c, err := Start(mode, srv, Options{RequestTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var mu sync.Mutex
			var got []Progress
			done := make(chan error, 1)
			go func() {
				_, err := c.CallToolContext(ctx, "slow", nil, func(p Progress) {
					mu.Lock()
					got = append(got, p)
					n := len(got)
					mu.Unlock()
					if n == 2 {
						cancel()
					}
				})
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, ErrCancelled) {
					t.Fatalf("CallToolContext: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the cancelled call did not return")
			}
			mu.Lock()
			if len(got) != 2 || got[0].Progress != 1 || got[1].Message != "step 2" || got[1].Total == nil || *got[1].Total != 3 {
				t.Errorf("progress %+v", got)
			}
			mu.Unlock()
			// The server saw the cancellation while its session was alive.
			var b []byte
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if b, _ = os.ReadFile(events); strings.Contains(string(b), "cancelled") {
					break
				}
			}
			want := "cancelled slow"
			if mode == "rich" {
				want = "cancelled 2 the caller cancelled the call" // id 1 was initialize
			}
			if !strings.Contains(string(b), want) {
				t.Fatalf("server events %q, want %q", b, want)
			}
			if _, err := c.ListTools(); err != nil {
				t.Fatalf("session after the cancel: %v", err)
			}
			c.Close()
			assertGone(t, pids, "server")
		})
	}
}

func TestClientTimeout(t *testing.T) {
	srv, pids := fixtureServer(t, "slow")
	c, err := Start("slow", srv, Options{RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListTools()
	if err == nil || !strings.Contains(err.Error(), "tools/list: no response within 300ms") {
		t.Fatalf("ListTools: %v", err)
	}
	c.Close()
	assertGone(t, pids, "server")
}

func TestClientCrashMidCall(t *testing.T) {
	for _, mode := range []string{"crash", "grandcrash"} {
		t.Run(mode, func(t *testing.T) {
			srv, pids := fixtureServer(t, mode)
			c, err := Start("crashy", srv, Options{RequestTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.CallTool("echo", json.RawMessage(`{"message":"x"}`))
			if err == nil || !strings.Contains(err.Error(), "tools/call") || !strings.Contains(err.Error(), "fatal: crashing mid-call") {
				t.Fatalf("CallTool: %v", err)
			}
			c.Close()
			roles := []string{"server"}
			if mode == "grandcrash" {
				roles = append(roles, "grandchild")
			}
			assertGone(t, pids, roles...)
		})
	}
}

// A grandchild in the server's process group dies with it, on the success
// path too, and so does a server that ignores SIGTERM.
func TestClientKillsWholeGroup(t *testing.T) {
	for _, mode := range []string{"grandchild", "ignoreterm", "good"} {
		t.Run(mode, func(t *testing.T) {
			srv, pids := fixtureServer(t, mode)
			c, err := Start("g", srv, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ListTools(); err != nil {
				t.Fatal(err)
			}
			pgid := c.tree.Pid()
			if !GroupAlive(pgid) {
				t.Fatal("group not alive before Close")
			}
			c.Close()
			if GroupAlive(pgid) {
				t.Fatalf("group %d alive after Close: %v", pgid, groupMembers(pgid))
			}
			roles := []string{"server"}
			if mode == "grandchild" {
				roles = append(roles, "grandchild")
			}
			assertGone(t, pids, roles...)
		})
	}
}

func TestClientServerRequests(t *testing.T) {
	srv, pids := fixtureServer(t, "serverreq")
	c, err := Start("req", srv, Options{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("the fixture fails initialize unless ping was answered and sampling refused: %v", err)
	}
	c.Close()
	assertGone(t, pids, "server")
}

func TestClientPagingAndResults(t *testing.T) {
	srv, _ := fixtureServer(t, "good")
	c, err := Start("good", srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.ListTools()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if fmt.Sprint(names) != "[echo image add fail]" {
		t.Fatalf("tools over three pages: %v", names)
	}
	res, err := c.CallTool("image", nil)
	if err != nil || len(res.Content) != 2 || !strings.Contains(string(res.Content[1]), `"type":"image"`) {
		t.Fatalf("image: %+v %v", res, err)
	}
}

func TestClientEnvironmentIsCleared(t *testing.T) {
	t.Setenv("CTX_SECRET_FOR_TEST", "leak")
	srv, _ := fixtureServer(t, "good")
	srv.Env["DECLARED"] = "yes"
	c, err := Start("env", srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.CallTool("env", nil)
	if err != nil {
		t.Fatal(err)
	}
	var block struct{ Text string }
	json.Unmarshal(res.Content[0], &block)
	env := strings.Split(block.Text, "\n")
	want := []string{"DECLARED=yes", "FIXTURE_PIDS=" + srv.Env["FIXTURE_PIDS"], "PATH=/usr/bin:/bin"}
	if fmt.Sprint(env) != fmt.Sprint(want) {
		t.Fatalf("server environment %q, want %q", env, want)
	}
}

func TestClientOutOfOrder(t *testing.T) {
	srv, pids := fixtureServer(t, "ooo")
	c, err := Start("ooo", srv, Options{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]string, 2)
	errs := make([]error, 2)
	for i, msg := range []string{"first", "second"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				time.Sleep(50 * time.Millisecond) // so the fixture holds "first"
			}
			res, err := c.CallTool("echo", json.RawMessage(`{"message":"`+msg+`"}`))
			errs[i] = err
			if err == nil {
				got[i] = string(res.Structured)
			}
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || got[0] != `{"echoed":"first"}` || got[1] != `{"echoed":"second"}` {
		t.Fatalf("results %q errors %v", got, errs)
	}
	c.Close()
	assertGone(t, pids, "server")
}

func TestClientStderrFlood(t *testing.T) {
	srv, pids := fixtureServer(t, "flood")
	c, err := Start("flood", srv, Options{RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTools(); err != nil {
		t.Fatal(err)
	}
	if n := len(c.stderr.buf); n > stderrKeep {
		t.Fatalf("kept %d bytes of stderr", n)
	}
	c.Close()
	assertGone(t, pids, "server")
}

// Listing shows what the server offers, even what projection will refuse.
func TestClientListsWhatProjectionRefuses(t *testing.T) {
	for _, mode := range []string{"dup", "badname", "taskreq"} {
		srv, _ := fixtureServer(t, mode)
		c, err := Start(mode, srv, Options{})
		if err != nil {
			t.Fatal(err)
		}
		tools, err := c.ListTools()
		c.Close()
		if err != nil {
			t.Fatalf("%s: listing is not projection; %v", mode, err)
		}
		if len(tools) == 0 {
			t.Fatalf("%s: no tools", mode)
		}
	}
}

func TestStartCommandNotFound(t *testing.T) {
	_, err := Start("x", ServerConfig{Command: "no-such-command-ctx"}, Options{})
	if err == nil || !strings.Contains(err.Error(), `server x: start: command "no-such-command-ctx" not found in PATH=/usr/bin:/bin`) {
		t.Fatalf("%v", err)
	}
	_, err = Start("x", ServerConfig{Command: "/nonexistent/server"}, Options{})
	if err == nil || !strings.Contains(err.Error(), "start") {
		t.Fatalf("%v", err)
	}
	// Our PATH is never used for the lookup.
	t.Setenv("PATH", fixture(t))
	if _, err := Start("x", ServerConfig{Command: "server"}, Options{}); err == nil {
		t.Fatal("found the command through the parent's PATH")
	}
}

// A command that exits at once (not speaking MCP) fails Start promptly.
func TestStartServerExitsAtOnce(t *testing.T) {
	_, err := Start("true", ServerConfig{Command: "true"}, Options{RequestTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "server true: initialize:") {
		t.Fatalf("%v", err)
	}
}

func TestClientToolLimits(t *testing.T) {
	for mode, want := range map[string]string{
		"manytools": "tools/list: more than 1024 tools",
		"endless":   "tools/list: more than 64 pages",
	} {
		srv, pids := fixtureServer(t, mode)
		c, err := Start(mode, srv, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ListTools()
		c.Close()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", mode, err, want)
		}
		assertGone(t, pids, "server")
	}
}

// A server that stops reading cannot block a large request forever.
func TestClientWriteToDeafServer(t *testing.T) {
	srv, pids := fixtureServer(t, "deaf")
	c, err := Start("deaf", srv, Options{RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"message":"` + strings.Repeat("a", 900<<10) + `"}`)
	_, err = c.CallTool("echo", big)
	if err == nil || !strings.Contains(err.Error(), "tools/call") {
		t.Fatalf("CallTool: %v", err)
	}
	c.Close()
	assertGone(t, pids, "server")
}

// A frame that passes MaxFrame without a newline fails the session at the
// limit, not at the request timeout: the client stops reading it once it
// is too large (a server's frame never needs resynchronising, since the
// session is over), and the server is gone with it.
func TestClientUnterminatedOversizedFrame(t *testing.T) {
	srv, pids := fixtureServer(t, "unterminated")
	const timeout = 20 * time.Second
	began := time.Now()
	c, err := Start("fake", srv, Options{RequestTimeout: timeout})
	took := time.Since(began)
	if err == nil {
		c.Close()
		t.Fatal("Start succeeded")
	}
	if !strings.Contains(err.Error(), "frame exceeds 1048576 bytes") {
		t.Fatalf("err %v, want the frame limit", err)
	}
	if took >= timeout/2 {
		t.Fatalf("failed after %v: at the request timeout, not at the frame limit", took)
	}
	assertGone(t, pids, "server")
}

// CallTool calls tool name with arguments (a JSON object).
func (c *Client) CallTool(name string, arguments json.RawMessage) (*CallResult, error) {
	return c.CallToolContext(context.Background(), name, arguments, nil)
}
