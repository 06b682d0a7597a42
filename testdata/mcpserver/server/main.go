// Command server is an MCP stdio server for ctx's tests. The first argument
// selects a mode:
//
//	sdk [VERSION...]  the official Go SDK server, offering only VERSIONs
//	                  (default: the four stable ones); tools greet, fail,
//	                  picture (an image and structured content, with an
//	                  outputSchema) and slow (progress, then it waits to be
//	                  cancelled)
//	MODE              a hand-written server; see the modes in fake.go
//
// When FIXTURE_PIDS names a file, the server appends "server PID" to it,
// and modes that spawn a grandchild append "grandchild PID". When
// FIXTURE_EVENTS names a file, the server appends what it saw happen to a
// call ("cancelled slow", "cancelled ID REASON"): the server side's own
// account of a cancellation.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

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
	appendLine("FIXTURE_PIDS", fmt.Sprintf("%s %d", role, pid))
}

func recordEvent(what string) { appendLine("FIXTURE_EVENTS", what) }

func appendLine(env, line string) {
	p := os.Getenv(env)
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
}

type pictureOut struct {
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Format string `json:"format"`
}

// png1x1 is a 1x1 transparent PNG.
var png1x1 = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\x00\x01\x00\x00\x05\x00\x01\r\n-\xb4\x00\x00\x00\x00IEND\xaeB`\x82")

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
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Title: "Picture", Description: "Return a tiny PNG and its size.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, pictureOut, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a 1x1 PNG"},
				&mcp.ImageContent{Data: png1x1, MIMEType: "image/png"},
			}}, pictureOut{Width: 1, Height: 1, Format: "png"}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Report progress, then wait until cancelled (30 s at most)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 2; i++ {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
				}
			}
			select {
			case <-ctx.Done():
				recordEvent("cancelled slow")
				return nil, nil, ctx.Err()
			case <-time.After(30 * time.Second):
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "finished"}}}, nil, nil
			}
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func boolPtr(b bool) *bool { return &b }
