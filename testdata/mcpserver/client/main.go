// Command client drives an MCP stdio server with the official Go SDK
// client, as a hosted agent CLI would, and prints what it saw as one JSON
// object. Usage:
//
//	client [-version V] [-progress] [-call NAME=JSON]... [-cancel NAME=JSON@DURATION|@progress:N]
//	       [-then SHELL-COMMAND [-wait DURATION]] [-after-call NAME=JSON]... -- COMMAND ARGS...
//
// -progress asks for progress on every call and reports the notifications
// each call received. -cancel makes a call and cancels it after DURATION
// (the SDK sends notifications/cancelled), or, for NAME=JSON@progress:N,
// once N progress notifications of the call have arrived (30 s at most),
// which does not depend on how fast the machine is. -then runs a shell command
// after the calls (a policy change, say), waits up to -wait for
// notifications/tools/list_changed, lists the tools again and makes the
// -after-call calls.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type calls []string

func (c *calls) String() string     { return strings.Join(*c, ",") }
func (c *calls) Set(s string) error { *c = append(*c, s); return nil }

type progressReport struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

type callReport struct {
	Name     string           `json:"name"`
	IsError  bool             `json:"isError"`
	Text     []string         `json:"text"`
	Err      string           `json:"err,omitempty"`
	Raw      json.RawMessage  `json:"raw,omitempty"`
	Progress []progressReport `json:"progress,omitempty"`
	MS       int64            `json:"ms"`
}

type report struct {
	Protocol    string            `json:"protocol"`
	Server      string            `json:"server"`
	Tools       []json.RawMessage `json:"tools"`
	Ping        string            `json:"ping"`
	Calls       []callReport      `json:"calls"`
	ListChanged int               `json:"listChanged"`
	ToolsAfter  []string          `json:"toolsAfter,omitempty"`
	AfterCalls  []callReport      `json:"afterCalls,omitempty"`
}

func main() {
	var cs, after calls
	version := flag.String("version", "", "protocol version to request (default: the SDK's, which starts with server/discover)")
	flag.Var(&cs, "call", "NAME=JSON arguments; repeatable")
	cancelCall := flag.String("cancel", "", "NAME=JSON@DURATION: a call cancelled after DURATION")
	withProgress := flag.Bool("progress", false, "ask for progress on every call")
	then := flag.String("then", "", "shell command to run after the calls")
	wait := flag.Duration("wait", 10*time.Second, "how long to wait for list_changed after -then")
	flag.Var(&after, "after-call", "NAME=JSON arguments, called after -then; repeatable")
	flag.Parse()
	argv := flag.Args()
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "usage: client [-call NAME=JSON]... -- COMMAND ARGS...")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var mu sync.Mutex
	progress := map[string][]progressReport{} // by token
	progressed := make(chan string, 64)       // tokens, one per notification
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "ctx-test-client", Version: "0.1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			changed <- struct{}{}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			tok := fmt.Sprint(req.Params.ProgressToken)
			progress[tok] = append(progress[tok], progressReport{req.Params.Progress, req.Params.Total, req.Params.Message})
			select {
			case progressed <- tok:
			default:
			}
		},
	})
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
	n := 0
	call := func(spec string, cancelAfter time.Duration, cancelAtProgress int) callReport {
		name, args, _ := strings.Cut(spec, "=")
		var a map[string]any
		if args != "" {
			if err := json.Unmarshal([]byte(args), &a); err != nil {
				fmt.Fprintln(os.Stderr, "bad call:", err)
				os.Exit(2)
			}
		}
		cr := callReport{Name: name}
		params := &mcp.CallToolParams{Name: name, Arguments: a}
		n++
		token := fmt.Sprintf("tok-%d", n)
		if *withProgress {
			params.SetProgressToken(token)
		}
		cctx := ctx
		if cancelAfter > 0 {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(ctx, cancelAfter)
			defer cancel()
		}
		if cancelAtProgress > 0 {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			go func() {
				for seen := 0; seen < cancelAtProgress; {
					select {
					case tok := <-progressed:
						if tok == token {
							seen++
						}
					case <-cctx.Done():
						return
					}
				}
				cancel()
			}()
		}
		began := time.Now()
		res, err := session.CallTool(cctx, params)
		cr.MS = time.Since(began).Milliseconds()
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
		mu.Lock()
		cr.Progress = progress[token]
		mu.Unlock()
		return cr
	}
	for _, c := range cs {
		r.Calls = append(r.Calls, call(c, 0, 0))
	}
	if *cancelCall != "" {
		spec, d, _ := strings.Cut(*cancelCall, "@")
		var after time.Duration
		var atProgress int
		var err error
		if n, ok := strings.CutPrefix(d, "progress:"); ok {
			_, err = fmt.Sscanf(n, "%d", &atProgress)
		} else {
			after, err = time.ParseDuration(d)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad -cancel:", err)
			os.Exit(2)
		}
		r.Calls = append(r.Calls, call(spec, after, atProgress))
	}
	if *then != "" {
		if out, err := exec.Command("/bin/sh", "-c", *then).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "-then: %v: %s\n", err, out)
			os.Exit(1)
		}
		select {
		case <-changed:
			r.ListChanged++
		case <-time.After(*wait):
		}
		for t, err := range session.Tools(ctx, nil) {
			if err != nil {
				fmt.Fprintln(os.Stderr, "tools/list:", err)
				os.Exit(1)
			}
			r.ToolsAfter = append(r.ToolsAfter, t.Name)
		}
		for _, c := range after {
			r.AfterCalls = append(r.AfterCalls, call(c, 0, 0))
		}
	}
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Println(string(out))
}
