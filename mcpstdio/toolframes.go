package mcpstdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// nativeOutput is a native-mode tool's standard output read back (ctx man
// ctx.tool, MODES AND FRAMES): the content blocks of its message frames in
// order, the last structuredContent, its error frame and its done status.
type nativeOutput struct {
	content    []json.RawMessage
	structured json.RawMessage
	hasErr     bool
	errCode    string
	errMsg     string
	done       string // "ok", "error", or "" when no done frame came
}

// parseToolFrames reads JSONL frames. isFrames is false when the output
// does not start with a start frame: a tool that ignores CTX_TOOL_MODE
// wrote plain text, which the caller takes as such. Once it is frames,
// every non-blank line must be a JSON object with a string "type", a
// message's content an array of objects with a string "type", and its
// structuredContent an object; an error names the line and the field.
// Frame types other than message, error and done (start, progress, ones
// not yet defined) carry nothing for the result.
func parseToolFrames(data []byte) (out nativeOutput, isFrames bool, err error) {
	lines := bytes.Split(data, []byte("\n"))
	started := false
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		n := i + 1
		var f struct {
			Type       *string           `json:"type"`
			Content    []json.RawMessage `json:"content"`
			Structured json.RawMessage   `json:"structuredContent"`
			Code       string            `json:"code"`
			Message    string            `json:"message"`
			Status     string            `json:"status"`
		}
		jerr := json.Unmarshal(line, &f)
		if !started {
			if jerr != nil || f.Type == nil || *f.Type != "start" || line[0] != '{' {
				return out, false, nil
			}
			started = true
			continue
		}
		switch {
		case jerr != nil || bytes.TrimSpace(line)[0] != '{':
			return out, true, fmt.Errorf("line %d: not a JSON object frame", n)
		case f.Type == nil:
			return out, true, fmt.Errorf("line %d: field \"type\" missing", n)
		}
		switch *f.Type {
		case "message":
			for j, b := range f.Content {
				var blk struct {
					Type *string `json:"type"`
				}
				if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &blk) != nil || blk.Type == nil {
					return out, true, fmt.Errorf("line %d: field \"content[%d]\" is not a content block", n, j)
				}
				out.content = append(out.content, b)
			}
			if s := bytes.TrimSpace(f.Structured); len(s) > 0 && string(s) != "null" {
				if s[0] != '{' {
					return out, true, fmt.Errorf("line %d: field \"structuredContent\" is not an object", n)
				}
				out.structured = s
			}
		case "error":
			out.hasErr, out.errCode, out.errMsg = true, f.Code, f.Message
		case "done":
			out.done = f.Status
		}
	}
	return out, started, nil
}

// parseProgressFrame reads one progress frame, as a served tool writes it
// while it runs.
func parseProgressFrame(line []byte) (Progress, bool) {
	if !bytes.Contains(line, []byte(`"progress"`)) {
		return Progress{}, false
	}
	var f struct {
		Type     string   `json:"type"`
		Progress *float64 `json:"progress"`
		Total    *float64 `json:"total"`
		Message  string   `json:"message"`
	}
	if json.Unmarshal(line, &f) != nil || f.Type != "progress" || f.Progress == nil {
		return Progress{}, false
	}
	return Progress{Progress: *f.Progress, Total: f.Total, Message: f.Message}, true
}

// toolResult maps what a served tool left to the MCP result.
//
// Native frames: the message frames' content blocks, as they are (text,
// image, audio, resource, resource_link), and their structuredContent. The
// call is an error (isError) when there is an error frame, the done status
// is not ok, or the exit status is not 0; then the error frame's code and
// message are added as a text block "NAME: CODE: MESSAGE" unless the text
// blocks already say it (a projected tool's remote error text), empty text
// blocks are dropped, and without an error frame the tool's standard error
// (or "NAME: exit status N") is added.
//
// Plain output (a tool that wrote no frames): exit 0 is its standard output
// as one text block; any other exit is isError with its standard output
// (when any) and its standard error (or the exit status) as text.
func toolResult(name string, run *runResult) ToolResult {
	errText := func(s string) ToolResult {
		return ToolResult{Content: []json.RawMessage{TextBlock(name + ": " + s)}, IsError: true}
	}
	if run.stdout.Truncated() {
		return errText(fmt.Sprintf("EFBIG: output larger than %d bytes", run.stdout.Limit))
	}
	out, isFrames, err := parseToolFrames(run.stdout.Bytes())
	stderr := truncated(run.stderr)
	if err != nil {
		return errText("EIO: malformed native output: " + err.Error())
	}
	if !isFrames {
		stdout := truncated(run.stdout)
		if run.status == 0 {
			return ToolResult{Content: []json.RawMessage{TextBlock(stdout)}}
		}
		var content []json.RawMessage
		if stdout != "" {
			content = append(content, TextBlock(stdout))
		}
		if strings.TrimSpace(stderr) == "" {
			stderr = name + ": exit status " + strconv.Itoa(run.status)
		}
		return ToolResult{Content: append(content, TextBlock(stderr)), IsError: true}
	}
	res := ToolResult{Content: out.content, Structured: out.structured}
	if !out.hasErr && out.done == "ok" && run.status == 0 {
		return res
	}
	res.IsError = true
	var kept []json.RawMessage
	var said strings.Builder
	for _, b := range res.Content {
		var blk struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		_ = json.Unmarshal(b, &blk)
		if blk.Type == "text" && blk.Text != nil {
			if *blk.Text == "" {
				continue
			}
			said.WriteString(*blk.Text + "\n")
		}
		kept = append(kept, b)
	}
	res.Content = kept
	switch {
	case out.hasErr:
		if out.errMsg == "" || !strings.Contains(said.String(), out.errMsg) {
			res.Content = append(res.Content, TextBlock(name+": "+out.errCode+": "+out.errMsg))
		}
	case strings.TrimSpace(stderr) != "":
		res.Content = append(res.Content, TextBlock(stderr))
	case len(res.Content) == 0:
		res.Content = append(res.Content, TextBlock(name+": exit status "+strconv.Itoa(run.status)))
	}
	return res
}
