package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// serverEntry is one MCP server of a CLI's configuration: the mcpServers
// entry of Claude Code's JSON, the [mcp_servers.NAME] table of Codex's
// TOML.
type serverEntry struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// mcpSession is a started stdio server, initialized, its tools listed.
type mcpSession struct {
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	next  int
	tools []string
}

// connect starts the server as the CLIs do (its command looked up on
// PATH, our environment plus its env), initializes it and lists its tools.
func connect(name string, e serverEntry) (*mcpSession, error) {
	cmd := exec.Command(e.Command, e.Args...)
	cmd.Env = os.Environ()
	for k, v := range e.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &mcpSession{name: name, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	if _, err := s.request("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "ctx-standin", "version": "1"}}); err != nil {
		s.close()
		return nil, err
	}
	fmt.Fprintln(s.in, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	res, err := s.request("tools/list", map[string]any{})
	if err != nil {
		s.close()
		return nil, err
	}
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		s.close()
		return nil, fmt.Errorf("tools/list: %v", err)
	}
	for _, t := range list.Tools {
		s.tools = append(s.tools, t.Name)
	}
	sort.Strings(s.tools)
	return s, nil
}

// request sends one request and returns its result, skipping the
// server's notifications; an error response or 30 s of silence fails.
func (s *mcpSession) request(method string, params any) (json.RawMessage, error) {
	s.next++
	id := s.next
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if _, err := fmt.Fprintf(s.in, "%s\n", line); err != nil {
		return nil, fmt.Errorf("%s: %v", method, err)
	}
	type reply struct {
		ID     *int            `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	got := make(chan reply, 1)
	failed := make(chan error, 1)
	go func() {
		for {
			l, err := s.out.ReadBytes('\n')
			if err != nil {
				failed <- fmt.Errorf("%s: the server closed its output (%v)", method, err)
				return
			}
			var r reply
			if json.Unmarshal(l, &r) == nil && r.ID != nil && *r.ID == id {
				got <- r
				return
			}
		}
	}()
	select {
	case r := <-got:
		if r.Error != nil {
			return nil, fmt.Errorf("%s: error %d: %s", method, r.Error.Code, r.Error.Message)
		}
		return r.Result, nil
	case err := <-failed:
		return nil, err
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%s: no answer in 30s", method)
	}
}

func (s *mcpSession) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// connectAll starts every configured server in name order and prints one
// line each, as the CLIs' status lists do.
func connectAll(entries map[string]serverEntry) []*mcpSession {
	var names []string
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*mcpSession
	for _, n := range names {
		s, err := connect(n, entries[n])
		if err != nil {
			fmt.Printf("mcp %s: failed: %v\n", n, err)
			continue
		}
		fmt.Printf("mcp %s: connected, %d tools: %s\n", n, len(s.tools), strings.Join(s.tools, " "))
		out = append(out, s)
	}
	return out
}

func closeAll(servers []*mcpSession) {
	for _, s := range servers {
		s.close()
	}
}

// callTool calls NAME with the JSON input on the first server that
// offers it and prints its text: "tool NAME: TEXT" (or "tool NAME:
// error: TEXT" for a tool's refusal).
func callTool(servers []*mcpSession, name, input string) bool {
	var args map[string]any
	if err := json.Unmarshal([]byte(input), &args); err != nil {
		fmt.Printf("tool %s: bad input: %v\n", name, err)
		return false
	}
	for _, s := range servers {
		for _, t := range s.tools {
			if t != name {
				continue
			}
			res, err := s.request("tools/call", map[string]any{"name": name, "arguments": args})
			if err != nil {
				fmt.Printf("tool %s: %v\n", name, err)
				return false
			}
			var r struct {
				Content []struct{ Text string } `json:"content"`
				IsError bool                    `json:"isError"`
			}
			json.Unmarshal(res, &r)
			var text []string
			for _, c := range r.Content {
				text = append(text, strings.TrimRight(c.Text, "\n"))
			}
			if r.IsError {
				fmt.Printf("tool %s: error: %s\n", name, strings.Join(text, " "))
				return false
			}
			fmt.Printf("tool %s: %s\n", name, strings.Join(text, " "))
			return true
		}
	}
	fmt.Printf("tool %s: no server offers it\n", name)
	return false
}
