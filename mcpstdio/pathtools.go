package mcpstdio

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"ctx/fsops"
	"ctx/policy/schema"
)

// PathTools serves the ctx tools found through a CTX_PATH: it lists them
// with their description and schema controls, and runs each call by
// executing the tool with the JSON arguments as its only argument in CLI
// mode (CTX_TOOL_MODE=cli).
type PathTools struct {
	Dirs    []string                         // CTX_PATH directories, searched left to right
	Visible func(hit fsops.ToolHit) bool     // which tools may be listed and run
	Env     []string                         // the tools' environment (KEY=VALUE); see Call
	Timeout time.Duration                    // per call; default DefaultCallTimeout
	Warn    func(format string, args ...any) // reports tools left out of the listing
	// OnRefused, when set, records a call refused before any tool ran
	// (a name that is not served): every call leaves one event.
	OnRefused func(name, reason string)
}

// Refused reports a call refused before any tool ran (Refuser).
func (p *PathTools) Refused(name, reason string) {
	if p.OnRefused != nil {
		p.OnRefused(name, reason)
	}
}

// Limits of a served tool call.
const (
	DefaultCallTimeout = 120 * time.Second
	MaxCallOutput      = 1 << 20 // per stream; the rest is read and dropped
)

// Tools lists the visible tools that have a usable input schema: the
// schema control must compile and describe an object (MCP requires it).
// A tool without a schema control takes any object.
func (p *PathTools) Tools() ([]ServedTool, error) {
	hits, _ := fsops.ListTools(p.Dirs)
	var out []ServedTool
	for _, h := range hits {
		if p.Visible != nil && !p.Visible(h) {
			continue
		}
		ctl, err := fsops.ReadControls(h.ControlDir, []string{"description", "schema"})
		if err != nil {
			p.warn("leaving out %s: %v", h.Name, err)
			continue
		}
		in := json.RawMessage(`{"type":"object"}`)
		if s, ok := ctl["schema"]; ok {
			if err := objectSchema(s); err != nil {
				p.warn("leaving out %s: schema control: %v", h.Name, err)
				continue
			}
			var compact bytes.Buffer
			_ = json.Compact(&compact, s)
			in = compact.Bytes()
		}
		out = append(out, ServedTool{Name: h.Name, Description: strings.TrimSpace(string(ctl["description"])), InputSchema: in})
	}
	return out, nil
}

func objectSchema(s []byte) error {
	if _, err := schema.Compile(s); err != nil {
		return err
	}
	var probe struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(s, &probe) != nil || string(probe.Type) != `"object"` {
		return fmt.Errorf(`type is not "object"`)
	}
	return nil
}

func (p *PathTools) warn(format string, args ...any) {
	if p.Warn != nil {
		p.Warn(format, args...)
	}
}

// Call runs the tool found again through the CTX_PATH (so a tool removed
// since listing is not run), as argv [NAME, ARGUMENTS-JSON], with stdin
// from /dev/null, in its own process group, with p.Env plus
// CTX_TOOL_MODE=cli, CTX_AUTHORIZED_OBJECT=<its path> and a fresh
// CTX_RUN_ID unless p.Env has one. Exit 0 yields its stdout as one text
// block; any other exit yields isError with its stdout (when any) and its
// stderr (or the exit status) as text. The tool and everything it started
// end with the call; when the call times out or ctx is cancelled they are
// killed first.
func (p *PathTools) Call(ctx context.Context, tool ServedTool, args json.RawMessage) (ToolResult, error) {
	hit, err := fsops.LookupTool(p.Dirs, tool.Name)
	if err != nil || (p.Visible != nil && !p.Visible(hit)) {
		return ToolResult{Content: []json.RawMessage{TextBlock("tool " + tool.Name + " is no longer available")}, IsError: true}, nil
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	env := append([]string{}, p.Env...)
	env = setEnv(env, "CTX_TOOL_MODE", "cli")
	env = setEnv(env, "CTX_AUTHORIZED_OBJECT", hit.Path)
	if !hasEnv(env, "CTX_RUN_ID") {
		env = append(env, "CTX_RUN_ID="+fsops.NewRunID())
	}
	stdout, stderr, status, err := runBounded(ctx, hit.Path, []string{tool.Name, string(args)}, env, timeout)
	if err != nil {
		return ToolResult{Content: []json.RawMessage{TextBlock(fmt.Sprintf("%s: %v", tool.Name, err))}, IsError: true}, nil
	}
	if status == 0 {
		return ToolResult{Content: []json.RawMessage{TextBlock(stdout)}}, nil
	}
	var content []json.RawMessage
	if stdout != "" {
		content = append(content, TextBlock(stdout))
	}
	if strings.TrimSpace(stderr) == "" {
		stderr = fmt.Sprintf("%s: exit status %d", tool.Name, status)
	}
	return ToolResult{Content: append(content, TextBlock(stderr)), IsError: true}, nil
}

func setEnv(env []string, k, v string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

func hasEnv(env []string, k string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			return true
		}
	}
	return false
}

// boundedBuffer keeps the first max bytes written and counts the rest.
type boundedBuffer struct {
	max     int
	buf     bytes.Buffer
	dropped int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	room := b.max - b.buf.Len()
	if room > len(p) {
		room = len(p)
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	b.dropped += int64(len(p) - room)
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	if b.dropped > 0 {
		return b.buf.String() + fmt.Sprintf("\n[truncated: %d more bytes]\n", b.dropped)
	}
	return b.buf.String()
}

// runBounded runs path with argv as a tree that ends whole with the call
// (fsops.StartTree), captures at most MaxCallOutput bytes of each output
// stream, and stops the tree on timeout or cancellation. status is the
// exit status, or 128+N for a signal.
func runBounded(ctx context.Context, path string, argv, env []string, timeout time.Duration) (string, string, int, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return "", "", 0, err
	}
	defer devnull.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return "", "", 0, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return "", "", 0, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: devnull, Stdout: outW, Stderr: errW}
	tree, err := fsops.StartTree(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return "", "", 0, fmt.Errorf("cannot run %s: %v", filepath.Base(path), err)
	}
	stdout := &boundedBuffer{max: MaxCallOutput}
	stderr := &boundedBuffer{max: MaxCallOutput}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(stdout, outR) }()
	go func() { defer wg.Done(); _, _ = io.Copy(stderr, errR) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var killed error
	select {
	case <-tree.Exited():
	case <-timer.C:
		killed = fmt.Errorf("timed out after %v", timeout)
	case <-ctx.Done():
		killed = fmt.Errorf("cancelled")
	}
	// The tool's tree is ended in every case, so nothing it started
	// outlives the call: its group gets SIGTERM and a grace period, then
	// SIGKILL, and so does everything that left the group.
	tree.Stop(DefaultKillGrace)
	_ = tree.Wait()
	// Every writer is dead unless one got out of reach; read what is left
	// in the pipes, and only then close them to unblock the copies.
	copied := make(chan struct{})
	go func() { wg.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	outR.Close()
	errR.Close()
	<-copied
	if killed != nil {
		return "", "", 0, killed
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	status := ws.ExitStatus()
	if ws.Signaled() {
		status = 128 + int(ws.Signal())
	}
	return stdout.String(), stderr.String(), status, nil
}
