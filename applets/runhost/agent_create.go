package runhost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/policy"
)

// agentCreateSchema accepts both request shapes: the compact one (shared
// as ["SPACE:read"], mounts as objects, model a string) and the seed's own
// example (shared as {"SPACE":["read"]}, mounts as [SRC,DST,MODE] triples,
// model as a one-element list).
const agentCreateSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"agent.create input","type":"object",` +
	`"properties":{"name":{"type":"string","minLength":1},"label":{"type":"string"},` +
	`"model":{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":1}]},` +
	`"perm":{"type":"string"},"life":{"enum":["owned","temp"]},` +
	`"tools":{"type":"array","items":{"type":"string"}},` +
	`"shared":{"anyOf":[{"type":"array","items":{"type":"string"}},` +
	`{"type":"object","additionalProperties":{"type":"array","items":{"enum":["read","write"]},"minItems":1}}]},` +
	`"mount":{"type":"array","items":{"anyOf":[{"type":"object","properties":{"source":{"type":"string"},"target":{"type":"string"},` +
	`"mode":{"enum":["ro","rw"]}},"required":["source","target","mode"],"additionalProperties":false},` +
	`{"type":"array","items":{"type":"string"},"minItems":3,"maxItems":3}]}}},` +
	`"required":["name"],"additionalProperties":false}`

// AgentCreateTool creates a child of the calling agent (seed "optional
// agent lifecycle tools"): the run host checks the name-specific grant
// (allow PARENT_t agent:CHILD create) and that the child is an attenuation
// of the caller (ctx man policy), and writes the child whole or not at all.
var AgentCreateTool = &toolrun.BuiltinTool{
	Name:        "agent.create",
	Description: "Create a child of the calling agent: name, and optionally label, model, perm, tools, shared grants, mounts and life; never more than the caller holds. Runs only through the run host of an agent's run.",
	Cap:         "agent.create",
	Schema:      agentCreateSchema,
	Run:         func(c *toolrun.ToolCall) error { return hostOperation(c, "agent.create") },
}

// createRequest is an agent.create request, either shape decoded into one.
type createRequest struct {
	Name, Label, Model, Perm, Life string
	Tools, Shared                  []string
	Mounts                         [][]string
}

// DecodeCreateRequest decodes an agent.create request strictly (unknown
// fields refused) in either shape; the host decides everything else.
func DecodeCreateRequest(input []byte) (createRequest, error) {
	var in struct {
		Name   string            `json:"name"`
		Label  string            `json:"label"`
		Model  json.RawMessage   `json:"model"`
		Perm   string            `json:"perm"`
		Life   string            `json:"life"`
		Tools  []string          `json:"tools"`
		Shared json.RawMessage   `json:"shared"`
		Mount  []json.RawMessage `json:"mount"`
	}
	if err := strictDecode(input, &in); err != nil {
		return createRequest{}, err
	}
	req := createRequest{Name: in.Name, Label: in.Label, Perm: in.Perm, Life: in.Life, Tools: in.Tools}
	var err error
	if req.Model, err = decodeCreateModel(in.Model); err != nil {
		return req, err
	}
	if req.Shared, err = decodeCreateShared(in.Shared); err != nil {
		return req, err
	}
	for i, raw := range in.Mount {
		m, err := decodeCreateMount(raw)
		if err != nil {
			return req, fmt.Errorf("mount[%d]: %v", i, err)
		}
		req.Mounts = append(req.Mounts, m)
	}
	return req, nil
}

func isJSONArray(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '['
}

// decodeCreateModel: a string, or a list of exactly one (the model control
// names one model).
func decodeCreateModel(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if !isJSONArray(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("model: want a string or a list of one string")
		}
		return s, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != 1 {
		return "", fmt.Errorf("model: a list must name exactly one model (an agent has one model control)")
	}
	return list[0], nil
}

// decodeCreateShared: ["SPACE:read", ...] or {"SPACE": ["read", "write"]},
// both turned into SPACE:PERM grants (write includes read, as ctx agent
// new --shared does). The object's spaces are taken in name order.
func decodeCreateShared(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if isJSONArray(raw) {
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("shared: want [\"SPACE:read\",...] or {\"SPACE\":[\"read\"]}")
		}
		return list, nil
	}
	var obj map[string][]string
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("shared: want [\"SPACE:read\",...] or {\"SPACE\":[\"read\"]}")
	}
	spaces := make([]string, 0, len(obj))
	for s := range obj {
		spaces = append(spaces, s)
	}
	sort.Strings(spaces)
	var out []string
	for _, s := range spaces {
		if len(obj[s]) == 0 {
			return nil, fmt.Errorf("shared %q: names no permission (read, write)", s)
		}
		for _, p := range obj[s] {
			if p != "read" && p != "write" {
				return nil, fmt.Errorf("shared %q: permission %q: want read or write", s, p)
			}
			out = append(out, s+":"+p)
		}
	}
	return out, nil
}

// decodeCreateMount: {"source","target","mode"} or [SRC, DST, MODE].
func decodeCreateMount(raw json.RawMessage) ([]string, error) {
	if isJSONArray(raw) {
		var t []string
		if err := json.Unmarshal(raw, &t); err != nil || len(t) != 3 {
			return nil, fmt.Errorf("want [SOURCE, TARGET, \"ro\"|\"rw\"]")
		}
		if t[2] != "ro" && t[2] != "rw" {
			return nil, fmt.Errorf("mode %q: want ro or rw", t[2])
		}
		return t, nil
	}
	var m struct {
		Source string `json:"source"`
		Target string `json:"target"`
		Mode   string `json:"mode"`
	}
	if err := strictDecode(raw, &m); err != nil {
		return nil, err
	}
	if m.Mode != "ro" && m.Mode != "rw" {
		return nil, fmt.Errorf("mode %q: want ro or rw", m.Mode)
	}
	return []string{m.Source, m.Target, m.Mode}, nil
}

// AgentCreate creates a child of the calling agent: the caller's policy
// must name the child (allow SUBJ agent:CHILD create), and the child must
// be an attenuation of the caller (createAgent, policy.Attenuate), which
// includes keeping the caller's subject: a label is honoured only when its
// type is the caller's subject. The child is written whole or not at all,
// with parent=agent:CALLER session:S run:R.
func (b *Broker) AgentCreate(input []byte) broker.Reply {
	in, err := DecodeCreateRequest(input)
	if err != nil {
		return invalid("agent.create", "input: %v", err)
	}
	if err := policy.ValidName(in.Name); err != nil {
		return invalid("agent.create", "name: %v", err)
	}
	if in.Life != "" && in.Life != "owned" && in.Life != "temp" {
		return invalid("agent.create", "life %q: want owned or temp", in.Life)
	}
	r := b.R
	parent, err := authority.LoadAgent(r.Root, r.Agent.Name)
	if err != nil {
		return broker.Reply{Exit: cli.Unavailable, Errno: "EIO", Error: "agent.create: " + err.Error()}
	}
	if !parent.Policy.Allows(parent.Subject, policy.Object{Class: policy.ClassAgent, Name: in.Name}, policy.PermCreate) {
		return broker.Reply{Exit: cli.Denied, Errno: "EACCES",
			Error: fmt.Sprintf("agent.create: permission denied (agent-policy): %s's policy has no allow %s agent:%s create; nothing written", parent.Name, parent.Subject, in.Name)}
	}
	if in.Label != "" {
		if subj, err := policy.LabelSubject(in.Label); err == nil && subj != parent.Subject {
			return broker.Reply{Exit: cli.Denied, Errno: "EACCES", Error: fmt.Sprintf(
				"agent.create: agent %s would not be an attenuation of %s: child widens label: subject %s is not the parent's %s "+
					"(a child keeps its parent's subject; omit label, or give one whose type is %s); nothing written",
				in.Name, parent.Name, subj, parent.Subject, parent.Subject)}
		}
	}
	spec := lifecycle.AgentSpec{Name: in.Name, Parent: parent.Name, Label: in.Label, Perm: in.Perm, Model: in.Model,
		Tools: in.Tools, Shared: in.Shared, Mounts: in.Mounts, Temp: in.Life == "temp",
		Meta: "created by agent.create of agent " + parent.Name, ParentSession: r.Session, ParentRun: r.RunID}
	child, te := lifecycle.CreateAgent(r.Root, spec)
	if te != nil {
		return broker.Reply{Exit: te.Exit, Errno: toolrun.ErrnoName(te.Errno), Error: "agent.create: " + te.Msg}
	}
	r.recordEvent(fsops.Event{Type: "agent.create", Object: "agent/" + child.Name, Status: "ok",
		Detail: fmt.Sprintf("parent=%s perm=%s subject=%s", parent.Name, child.Ceiling, child.Subject)})
	return broker.Reply{Output: fmt.Sprintf("created agent/%s (subject %s, perm %s, parent %s)", child.Name, child.Subject, child.Ceiling, parent.Name)}
}
