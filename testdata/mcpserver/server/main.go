// Command server is an MCP stdio server for ctx's tests. The first argument
// selects a mode:
//
//	sdk [VERSION...]  the official Go SDK server, offering only VERSIONs
//	                  (default: the four stable ones); tools greet and fail
//	MODE              a hand-written server; see the modes in fake.go
//
// When FIXTURE_PIDS names a file, the server appends "server PID" to it,
// and modes that spawn a grandchild append "grandchild PID".
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: server MODE")
		os.Exit(2)
	}
	recordPid("server", os.Getpid())
	if os.Args[1] == "sdk" {
		runSDK(os.Args[2:])
		return
	}
	runFake(os.Args[1])
}

func recordPid(role string, pid int) {
	p := os.Getenv("FIXTURE_PIDS")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %d\n", role, pid)
	f.Close()
}

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
}

func runSDK(versions []string) {
	if len(versions) == 0 {
		versions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "gosdk-fixture", Version: "0.1"},
		&mcp.ServerOptions{SupportedProtocolVersions: versions})
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Say hello.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, greetOut, error) {
			return nil, greetOut{Greeting: "Hi " + in.Name}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed on purpose"}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}
