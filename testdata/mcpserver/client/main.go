// Command client drives an MCP stdio server with the official Go SDK
// client, as a hosted agent CLI would, and prints what it saw as one JSON
// object. Usage:
//
//	client [-version V] [-call NAME=JSON]... -- COMMAND ARGS...
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type calls []string

func (c *calls) String() string     { return strings.Join(*c, ",") }
func (c *calls) Set(s string) error { *c = append(*c, s); return nil }

type callReport struct {
	Name    string          `json:"name"`
	IsError bool            `json:"isError"`
	Text    []string        `json:"text"`
	Err     string          `json:"err,omitempty"`
	Raw     json.RawMessage `json:"raw,omitempty"`
}

type report struct {
	Protocol string            `json:"protocol"`
	Server   string            `json:"server"`
	Tools    []json.RawMessage `json:"tools"`
	Ping     string            `json:"ping"`
	Calls    []callReport      `json:"calls"`
}

func main() {
	var cs calls
	version := flag.String("version", "", "protocol version to request (default: the SDK's, which starts with server/discover)")
	flag.Var(&cs, "call", "NAME=JSON arguments; repeatable")
	flag.Parse()
	argv := flag.Args()
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "usage: client [-call NAME=JSON]... -- COMMAND ARGS...")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "ctx-test-client", Version: "0.1"}, nil)
	var opts *mcp.ClientSessionOptions
	if *version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: *version}
	}
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(argv[0], argv[1:]...)}, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
	defer session.Close()
	var r report
	init := session.InitializeResult()
	r.Protocol = init.ProtocolVersion
	if init.ServerInfo != nil {
		r.Server = init.ServerInfo.Name
	}
	if err := session.Ping(ctx, nil); err != nil {
		r.Ping = err.Error()
	} else {
		r.Ping = "ok"
	}
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "tools/list:", err)
			os.Exit(1)
		}
		b, _ := json.Marshal(t)
		r.Tools = append(r.Tools, b)
	}
	for _, c := range cs {
		name, args, _ := strings.Cut(c, "=")
		var a map[string]any
		if args != "" {
			if err := json.Unmarshal([]byte(args), &a); err != nil {
				fmt.Fprintln(os.Stderr, "bad -call:", err)
				os.Exit(2)
			}
		}
		cr := callReport{Name: name}
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: a})
		if err != nil {
			cr.Err = err.Error()
		} else {
			cr.IsError = res.IsError
			for _, c := range res.Content {
				if t, ok := c.(*mcp.TextContent); ok {
					cr.Text = append(cr.Text, t.Text)
				}
			}
			cr.Raw, _ = json.Marshal(res)
		}
		r.Calls = append(r.Calls, cr)
	}
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Println(string(out))
}
