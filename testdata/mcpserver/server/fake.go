package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Hand-written modes. Each behaves like a correct server except for the one
// thing its name says:
//
//	good          three pages of tools, echo and image tools, stderr chatter
//	version:V     answers initialize with protocolVersion V
//	nocaps        capabilities without "tools"
//	toolsnull     capabilities.tools is null
//	garbage       a non-JSON line on stdout before the initialize response
//	oversized     a 2 MiB line before the initialize response
//	unterminated  more than 1 MiB without a newline before the initialize
//	              response, then nothing more (it stays alive)
//	slow          never answers tools/list
//	crash         exits 3 during tools/call, after a line on stderr
//	serverreq     sends ping and sampling requests before answering
//	              initialize and fails initialize unless both got the right
//	              answers (result {} and error -32601)
//	dup           lists the same tool twice
//	badname       lists a tool whose name is not an object name
//	taskreq       one tool requires MCP tasks, one does not
//	arrayschema   a tool whose inputSchema has type "array"
//	flood         writes 8 MiB to stderr before answering initialize
//	ooo           answers out of order: an unknown id and a notification
//	              first, and of two concurrent tools/call the second first
//	grandchild    spawns a grandchild in its own process group, then is good
//	grandcrash    spawns a grandchild, then crashes during tools/call
//	daemon        leaves a sleeper in a session of its own whose parent
//	              exited (setsid, double fork), then is good
//	ignoreterm    ignores SIGTERM and stdin EOF (needs SIGKILL), otherwise good
//	iserror       tools/call returns isError with text
//	manytools     lists 1025 tools on one page
//	endless       every tools/list page has a nextCursor
//	deaf          answers initialize, then stops reading its input
//	rich          lists rich (every content type, structuredContent, a
//	              title, annotations, an outputSchema), slow (progress
//	              notifications, then no answer until cancelled: it
//	              records "cancelled ID REASON" to FIXTURE_EVENTS when
//	              notifications/cancelled names it, "abandoned ID" when its
//	              input ends first) and fail
//
// Every mode also answers a call of the unlisted tool env with its environment.
func runFake(mode string) {
	f := &fake{mode: mode, out: bufio.NewWriter(os.Stdout)}
	if mode == "ignoreterm" {
		signal.Ignore(syscall.SIGTERM)
	}
	if mode == "grandchild" || mode == "grandcrash" {
		cmd := exec.Command("/bin/sleep", "1000")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "cannot start grandchild:", err)
			os.Exit(1)
		}
		recordPid("grandchild", cmd.Process.Pid)
	}
	if mode == "daemon" {
		// sh forks setsid(1), which becomes a session leader and execs
		// sleep; sh prints its pid and exits: the sleeper is an orphan.
		out, err := exec.Command("/bin/sh", "-c", "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!").Output()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || pid <= 0 {
			fmt.Fprintln(os.Stderr, "cannot start daemon:", err)
			os.Exit(1)
		}
		recordPid("daemon", pid)
	}
	if mode == "flood" {
		chunk := []byte(strings.Repeat("x", 1023) + "\n")
		for i := 0; i < 8<<10; i++ {
			os.Stderr.Write(chunk)
		}
	}
	fmt.Fprintln(os.Stderr, "fake server starting in mode", mode)
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			f.handle(line)
		}
		if err != nil {
			if mode == "ignoreterm" {
				time.Sleep(time.Hour) // outlive stdin too: only SIGKILL ends this one
			}
			for id := range f.slowCalls {
				recordEvent("abandoned " + id)
			}
			return
		}
	}
}

type fake struct {
	mode string
	out  *bufio.Writer

	serverReqs  map[string]string // our request id -> method
	pingOK      bool
	refusedOK   bool
	initPending json.RawMessage
	heldCall    *msg            // ooo: the first tools/call, answered after the second
	slowCalls   map[string]bool // rich: slow calls waiting to be cancelled
}

type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code int `json:"code"`
	} `json:"error,omitempty"`
}

func (f *fake) send(v any) {
	b, _ := json.Marshal(v)
	f.out.Write(b)
	f.out.WriteByte('\n')
	f.out.Flush()
}

func (f *fake) result(id json.RawMessage, r any) {
	f.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": r})
}

func (f *fake) rpcError(id json.RawMessage, code int, text string) {
	f.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": text}})
}

func (f *fake) handle(line []byte) {
	var m msg
	if err := json.Unmarshal(line, &m); err != nil {
		return // like the TS servers: no reply to a malformed line
	}
	if m.Method == "" && len(m.ID) > 0 {
		f.clientResponse(m)
		return
	}
	switch m.Method {
	case "initialize":
		f.initialize(m)
	case "notifications/initialized":
		if f.mode == "deaf" {
			time.Sleep(time.Hour) // never reads again
		}
		if f.mode == "ooo" {
			f.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
		}
	case "ping":
		f.result(m.ID, struct{}{})
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		json.Unmarshal(m.Params, &p)
		if f.slowCalls[string(p.RequestID)] {
			delete(f.slowCalls, string(p.RequestID))
			recordEvent("cancelled " + string(p.RequestID) + " " + p.Reason)
		}
	case "tools/list":
		f.toolsList(m)
	case "tools/call":
		f.toolsCall(m)
	default:
		if len(m.ID) > 0 {
			f.rpcError(m.ID, -32601, "Method not found")
		}
	}
}

func (f *fake) initialize(m msg) {
	switch f.mode {
	case "garbage":
		f.out.WriteString("this is not JSON\n")
	case "oversized":
		f.out.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("a", 2<<20) + "\"}}\n")
	case "unterminated":
		f.out.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("a", 1<<20+1))
		f.out.Flush()
		time.Sleep(time.Hour) // the frame never ends: only the client's limit can
	case "serverreq":
		f.serverReqs = map[string]string{"901": "ping", "902": "sampling/createMessage"}
		f.initPending = m.ID
		f.send(map[string]any{"jsonrpc": "2.0", "id": 901, "method": "ping"})
		f.send(map[string]any{"jsonrpc": "2.0", "id": 902, "method": "sampling/createMessage", "params": map[string]any{}})
		return
	case "ooo":
		f.result(json.RawMessage("7777"), struct{}{}) // answers nothing the client asked
		f.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": "hello"}})
	}
	f.answerInit(m.ID)
}

func (f *fake) answerInit(id json.RawMessage) {
	version := "2025-11-25"
	if v, ok := strings.CutPrefix(f.mode, "version:"); ok {
		version = v
	}
	caps := map[string]any{"tools": map[string]any{"listChanged": true}, "logging": map[string]any{}}
	switch f.mode {
	case "nocaps":
		caps = map[string]any{"prompts": map[string]any{}}
	case "toolsnull":
		caps = map[string]any{"tools": nil}
	}
	f.result(id, map[string]any{"protocolVersion": version, "capabilities": caps,
		"serverInfo": map[string]any{"name": "fake-" + f.mode, "version": "1"}})
}

func (f *fake) clientResponse(m msg) {
	id := string(m.ID)
	switch f.serverReqs[id] {
	case "ping":
		f.pingOK = string(m.Result) == "{}" && m.Error == nil
	case "sampling/createMessage":
		f.refusedOK = m.Error != nil && m.Error.Code == -32601
	default:
		return
	}
	delete(f.serverReqs, id)
	if len(f.serverReqs) == 0 {
		if f.pingOK && f.refusedOK {
			f.answerInit(f.initPending)
		} else {
			f.rpcError(f.initPending, -32000, fmt.Sprintf("client answered badly: ping ok=%v, refusal ok=%v", f.pingOK, f.refusedOK))
		}
	}
}

func tool(name, desc string, schema any) map[string]any {
	return map[string]any{"name": name, "description": desc, "inputSchema": schema}
}

var objectSchema = map[string]any{"type": "object", "$schema": "http://json-schema.org/draft-07/schema#",
	"properties": map[string]any{"message": map[string]any{"type": "string"}}, "required": []string{"message"}}

func (f *fake) toolsList(m msg) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	json.Unmarshal(m.Params, &p)
	var tools []any
	next := any(nil)
	switch f.mode {
	case "slow":
		return
	case "manytools":
		for i := 0; i < 1025; i++ {
			tools = append(tools, tool(fmt.Sprintf("t%d", i), "", map[string]any{"type": "object"}))
		}
	case "endless":
		tools = []any{tool("p"+p.Cursor, "", map[string]any{"type": "object"})}
		next = p.Cursor + "x"
	case "dup":
		tools = []any{tool("echo", "one", objectSchema), tool("echo", "two", objectSchema)}
	case "badname":
		tools = []any{tool("bad/name", "slash", objectSchema)}
	case "taskreq":
		t := tool("research", "needs tasks", objectSchema)
		t["execution"] = map[string]any{"taskSupport": "required"}
		u := tool("echo", "plain", objectSchema)
		u["execution"] = map[string]any{"taskSupport": "forbidden"}
		tools = []any{t, u}
	case "arrayschema":
		tools = []any{tool("list", "array input", map[string]any{"type": "array"})}
	case "rich":
		rich := tool("rich", "Every kind of content.", map[string]any{"type": "object"})
		rich["title"] = "Rich result"
		rich["annotations"] = map[string]any{"title": "ignored: the top-level title wins", "readOnlyHint": true, "openWorldHint": false, "futureHint": 1}
		rich["outputSchema"] = map[string]any{"type": "object", "properties": map[string]any{
			"sum": map[string]any{"type": "number"}, "items": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}}
		tools = []any{rich, tool("slow", "Progress, then wait to be cancelled.", map[string]any{"type": "object"}),
			tool("fail", "Fail on purpose.", map[string]any{"type": "object"})}
	default:
		// Three pages: echo, then image and add, then a last page.
		switch p.Cursor {
		case "":
			tools = []any{tool("echo", "Echo a message.\r\nSecond line\x1b[31m red", objectSchema)}
			next = "page-2"
		case "page-2":
			tools = []any{
				tool("image", "Return an image block.", map[string]any{"type": "object"}),
				tool("add", "Add two numbers.", map[string]any{"type": "object", "properties": map[string]any{
					"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}, "required": []string{"a", "b"}}),
			}
			next = "page-3"
		case "page-3":
			tools = []any{tool("fail", "Fail on purpose.", map[string]any{"type": "object"})}
		default:
			f.rpcError(m.ID, -32602, "bad cursor")
			return
		}
	}
	r := map[string]any{"tools": tools}
	if next != nil {
		r["nextCursor"] = next
	}
	f.result(m.ID, r)
}

func (f *fake) toolsCall(m msg) {
	var p struct {
		Name      string                     `json:"name"`
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(m.Params, &p)
	switch f.mode {
	case "crash", "grandcrash":
		fmt.Fprintln(os.Stderr, "fatal: crashing mid-call")
		os.Exit(3)
	case "ooo":
		if f.heldCall == nil {
			held := m
			f.heldCall = &held
			return
		}
		f.answerCall(m, p.Name, p.Arguments)
		var q struct {
			Name      string                     `json:"name"`
			Arguments map[string]json.RawMessage `json:"arguments"`
		}
		json.Unmarshal(f.heldCall.Params, &q)
		f.answerCall(*f.heldCall, q.Name, q.Arguments)
		f.heldCall = nil
		return
	}
	f.answerCall(m, p.Name, p.Arguments)
}

// richContent is one block of every content type MCP defines.
var richContent = []any{
	map[string]any{"type": "text", "text": "rich result"},
	map[string]any{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
	map[string]any{"type": "audio", "data": "UklGRiQAAABXQVZF", "mimeType": "audio/wav"},
	map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "hello notes"}},
	map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///b.bin", "mimeType": "application/octet-stream", "blob": "AAECAw=="}},
	map[string]any{"type": "resource_link", "uri": "file:///README.md", "name": "README", "mimeType": "text/markdown"},
}

func (f *fake) answerCall(m msg, name string, args map[string]json.RawMessage) {
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	switch {
	case f.mode == "rich" && name == "rich":
		f.result(m.ID, map[string]any{"content": richContent, "structuredContent": map[string]any{"sum": 3, "items": []string{"a", "b"}}})
	case f.mode == "rich" && name == "slow":
		var meta struct {
			Meta struct {
				Token json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		json.Unmarshal(m.Params, &meta)
		if len(meta.Meta.Token) > 0 {
			for i := 1; i <= 2; i++ {
				f.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{
					"progressToken": meta.Meta.Token, "progress": i, "total": 3, "message": fmt.Sprintf("step %d", i)}})
			}
		}
		if f.slowCalls == nil {
			f.slowCalls = map[string]bool{}
		}
		f.slowCalls[string(m.ID)] = true // answered never: only cancelled
		recordEvent("started " + string(m.ID))
	case name == "fail" || f.mode == "iserror":
		f.result(m.ID, map[string]any{"content": []any{text("remote failure: " + string(args["message"]))}, "isError": true})
	case name == "echo":
		var s string
		json.Unmarshal(args["message"], &s)
		if s == "sleep" {
			time.Sleep(200 * time.Millisecond)
		}
		f.result(m.ID, map[string]any{"content": []any{text("Echo: " + s)}, "structuredContent": map[string]any{"echoed": s}})
	case name == "env":
		f.result(m.ID, map[string]any{"content": []any{text(strings.Join(os.Environ(), "\n"))}})
	case name == "image":
		f.result(m.ID, map[string]any{"content": []any{text("an image follows"), map[string]any{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}}})
	case name == "add":
		var a, b float64
		json.Unmarshal(args["a"], &a)
		json.Unmarshal(args["b"], &b)
		sum, _ := json.Marshal(map[string]float64{"sum": a + b})
		f.result(m.ID, map[string]any{"content": []any{text(string(sum))}, "structuredContent": json.RawMessage(sum)})
	default:
		f.result(m.ID, map[string]any{"content": []any{text("unknown tool " + name)}, "isError": true})
	}
}
