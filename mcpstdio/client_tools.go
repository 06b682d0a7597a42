package mcpstdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Tool is one tool a server lists.
type Tool struct {
	Name        string
	Title       string // the top-level title; "" when absent
	Description string
	InputSchema json.RawMessage
	// OutputSchema and Annotations are the server's objects as sent; nil
	// when absent or not objects (optional metadata a server gets wrong
	// does not cost it the listing).
	OutputSchema json.RawMessage
	Annotations  json.RawMessage
	TaskSupport  string // execution.taskSupport; "" when absent
}

// ListTools pages through tools/list: at most MaxToolPages pages and
// MaxTools tools.
func (c *Client) ListTools() ([]Tool, error) {
	var tools []Tool
	var cursor *string
	fail := func(format string, args ...any) ([]Tool, error) {
		return nil, &Error{Server: c.name, Op: "tools/list", Err: fmt.Errorf(format, args...)}
	}
	for page := 1; ; page++ {
		if page > MaxToolPages {
			return fail("more than %d pages", MaxToolPages)
		}
		var params map[string]any
		if cursor != nil {
			params = map[string]any{"cursor": *cursor}
		}
		res, err := c.requestCtx(context.Background(), "tools/list", params, nil)
		if err != nil {
			return nil, err
		}
		var r struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor *string           `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return fail("malformed result: %v", err)
		}
		if r.Tools == nil {
			return fail("result has no tools array")
		}
		for i, raw := range r.Tools {
			t, err := parseTool(raw)
			if err != nil {
				return fail("page %d, tool %d: %v", page, i, err)
			}
			if len(tools) == MaxTools {
				return fail("more than %d tools", MaxTools)
			}
			tools = append(tools, t)
		}
		if r.NextCursor == nil {
			return tools, nil
		}
		cursor = r.NextCursor
	}
}

func parseTool(raw json.RawMessage) (Tool, error) {
	var t Tool
	var w struct {
		Name         *string         `json:"name"`
		Title        json.RawMessage `json:"title"`
		Description  *string         `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  json.RawMessage `json:"annotations"`
		Execution    *struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	if len(raw) == 0 || raw[0] != '{' {
		return t, errors.New("not an object")
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return t, err
	}
	if w.Name == nil {
		return t, errors.New("no name")
	}
	t.Name = *w.Name
	if w.Description != nil {
		t.Description = *w.Description
	}
	if len(w.InputSchema) == 0 || w.InputSchema[0] != '{' {
		return t, fmt.Errorf("tool %q: inputSchema is not an object", t.Name)
	}
	t.InputSchema = w.InputSchema
	_ = json.Unmarshal(w.Title, &t.Title) // not a string: no title
	if len(w.OutputSchema) > 0 && w.OutputSchema[0] == '{' {
		t.OutputSchema = w.OutputSchema
	}
	if len(w.Annotations) > 0 && w.Annotations[0] == '{' {
		t.Annotations = w.Annotations
	}
	if w.Execution != nil {
		t.TaskSupport = w.Execution.TaskSupport
	}
	return t, nil
}

// CallResult is the result of tools/call.
type CallResult struct {
	Content    []json.RawMessage // content blocks, each an object with a "type"
	Structured json.RawMessage   // structuredContent; nil when absent
	IsError    bool
}

// CallToolContext calls tool name with arguments (a JSON object). When
// ctx ends first it sends notifications/cancelled for the call and
// returns an error wrapping ErrCancelled; with onProgress it asks for
// progress and hands it each notification.
func (c *Client) CallToolContext(ctx context.Context, name string, arguments json.RawMessage, onProgress func(Progress)) (*CallResult, error) {
	if len(arguments) == 0 {
		arguments = json.RawMessage("{}")
	}
	res, err := c.requestCtx(ctx, "tools/call", map[string]any{"name": name, "arguments": arguments}, onProgress)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) (*CallResult, error) {
		return nil, &Error{Server: c.name, Op: "tools/call", Err: fmt.Errorf(format, args...)}
	}
	var r struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fail("malformed result: %v", err)
	}
	for i, b := range r.Content {
		var block struct {
			Type string `json:"type"`
		}
		if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &block) != nil || block.Type == "" {
			return fail("content[%d] is not a content block", i)
		}
	}
	out := &CallResult{Content: r.Content, IsError: r.IsError}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		out.Structured = r.StructuredContent
	}
	return out, nil
}
