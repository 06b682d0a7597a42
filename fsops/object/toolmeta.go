package object

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"ctx/policy"
)

// Annotations is the `annotations` control of a tool: the MCP tool
// annotations (hints a client may use to decide, for example, that a
// read-only tool needs no confirmation). They describe the tool; they grant
// nothing and policy never reads them. A nil hint is absent, which MCP
// clients read as its default (readOnlyHint false, destructiveHint true,
// idempotentHint false, openWorldHint true).
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// MaxTitle bounds an annotations title, in bytes: a display name, not a
// description.
const MaxTitle = 256

// annotationHints are the boolean fields of the control, in MCP's order.
var annotationHints = []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

// ParseAnnotations parses the `annotations` control strictly: one JSON
// object whose fields are among title (a non-empty string of at most
// MaxTitle bytes, one line, no control characters) and the four MCP hints
// (true or false); no other field, no repeats, no null. One trailing newline
// is allowed, as control files end in one.
func ParseAnnotations(data []byte) (Annotations, error) {
	var a Annotations
	m, err := policy.StrictObject(data)
	if err != nil {
		return a, fmt.Errorf("annotations: %v", err)
	}
	if err := policy.OnlyFields(m, "", append([]string{"title"}, annotationHints...)...); err != nil {
		return a, fmt.Errorf("annotations: %v (known: title %s)", err, strings.Join(annotationHints, " "))
	}
	if raw, ok := m["title"]; ok {
		if a.Title, err = policy.StringField(raw, "title"); err != nil {
			return a, fmt.Errorf("annotations: %v", err)
		}
		switch {
		case a.Title == "":
			return a, fmt.Errorf("annotations: field \"title\" is empty")
		case len(a.Title) > MaxTitle:
			return a, fmt.Errorf("annotations: field \"title\" is longer than %d bytes", MaxTitle)
		case !utf8.ValidString(a.Title) || hasControlByte(a.Title):
			return a, fmt.Errorf("annotations: field \"title\" must be one line of UTF-8 without control characters")
		}
	}
	dst := []**bool{&a.ReadOnlyHint, &a.DestructiveHint, &a.IdempotentHint, &a.OpenWorldHint}
	for i, k := range annotationHints {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var b bool
		switch string(raw) {
		case "true":
			b = true
		case "false":
		default:
			return a, fmt.Errorf("annotations: field %q must be true or false", k)
		}
		*dst[i] = &b
	}
	return a, nil
}

// JSON encodes the annotations as one compact line, fields in MCP's order;
// it parses back to the same value.
func (a Annotations) JSON() string {
	b, _ := json.Marshal(a)
	return string(b)
}

// IsZero reports whether no field is set.
func (a Annotations) IsZero() bool {
	return a.Title == "" && a.ReadOnlyHint == nil && a.DestructiveHint == nil && a.IdempotentHint == nil && a.OpenWorldHint == nil
}

// Input modes of the `input` control: how a tool takes its JSON input when
// a program (ctxmcp serve) calls it. argv, the default, passes the object
// as the only argument (every ctx tool accepts it); stdin passes it on
// standard input with no argument, for tools that read only stdin (the
// agentrc invocation contract allows both).
const (
	InputArgv  = "argv"
	InputStdin = "stdin"
)

// ParseInput parses the `input` control: one line, argv or stdin. A
// missing control means argv.
func ParseInput(data []byte) (string, error) {
	v, err := oneLine(string(data))
	if err != nil {
		return "", fmt.Errorf("input: %v", err)
	}
	if v != InputArgv && v != InputStdin {
		return "", fmt.Errorf("input: %q is not argv or stdin", v)
	}
	return v, nil
}

// validOutputSchema checks the `output.schema` control: the JSON Schema of
// the tool's structured result (MCP outputSchema), a schema ctx can
// compile whose type is "object", as MCP requires of an outputSchema.
func validOutputSchema(value []byte) error {
	if err := validSchemaObject(value); err != nil {
		return err
	}
	var probe struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(value, &probe) != nil || string(probe.Type) != `"object"` {
		return fmt.Errorf(`output.schema: type must be "object"`)
	}
	return nil
}
