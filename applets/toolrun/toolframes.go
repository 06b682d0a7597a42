package toolrun

import (
	"encoding/json"
	"io"

	"ctx/applets/cli"
	"ctx/mcpstdio"
)

// frameWriter writes native-mode JSONL frames (ctx man ctx.tool, MODES AND
// FRAMES), for every tool the runner runs; in CLI mode it does nothing.
type frameWriter struct {
	w      io.Writer
	run    string
	tool   string
	native bool
}

func newFrameWriter(e *cli.Env, tool string, native bool) *frameWriter {
	run := e.Getenv("CTX_RUN_ID")
	if run == "" {
		run = "r1"
	}
	return &frameWriter{w: e.Stdout, run: run, tool: tool, native: native}
}

func (f *frameWriter) frame(v any) {
	if !f.native {
		return
	}
	b, _ := json.Marshal(v)
	f.w.Write(append(b, '\n'))
}

// The frames, as structs so that "type" comes first on every line. A
// message frame's content is MCP content blocks: a builtin's text, or what
// a projected tool's server returned, with its structuredContent.
type (
	startFrame struct {
		Type string `json:"type"`
		Run  string `json:"run"`
		Tool string `json:"tool"`
	}
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	messageFrame struct {
		Type       string            `json:"type"`
		Run        string            `json:"run"`
		Role       string            `json:"role"`
		Content    []json.RawMessage `json:"content,omitempty"`
		Structured json.RawMessage   `json:"structuredContent,omitempty"`
	}
	progressFrame struct {
		Type     string   `json:"type"`
		Run      string   `json:"run"`
		Message  string   `json:"message,omitempty"`
		Progress float64  `json:"progress"`
		Total    *float64 `json:"total,omitempty"`
	}
	errorFrame struct {
		Type    string `json:"type"`
		Run     string `json:"run"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	doneFrame struct {
		Type   string `json:"type"`
		Run    string `json:"run"`
		Status string `json:"status"`
	}
)

func (f *frameWriter) start() { f.frame(startFrame{"start", f.run, f.tool}) }

// message writes a builtin's plain output as one text block; nothing when
// there is none.
func (f *frameWriter) message(text string) {
	if text == "" {
		return
	}
	b, _ := json.Marshal(textBlock{"text", text})
	f.frame(messageFrame{"message", f.run, "tool", []json.RawMessage{b}, nil})
}

// Content writes content blocks as they came, and structured content.
func (f *frameWriter) Content(blocks []json.RawMessage, structured json.RawMessage) {
	f.frame(messageFrame{"message", f.run, "tool", blocks, structured})
}

// Progress writes a progress frame (only asked for with CTX_TOOL_PROGRESS=1).
func (f *frameWriter) Progress(p mcpstdio.Progress) {
	f.frame(progressFrame{"progress", f.run, p.Message, p.Progress, p.Total})
}

func (f *frameWriter) error(code, msg string) { f.frame(errorFrame{"error", f.run, code, msg}) }

func (f *frameWriter) done(ok bool) {
	status := "ok"
	if !ok {
		status = "error"
	}
	f.frame(doneFrame{"done", f.run, status})
}
