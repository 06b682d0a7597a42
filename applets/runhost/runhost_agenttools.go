package runhost

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/applets/lifecycle"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/policy"
)

// maxSelfUpdate is the largest prompt control agent.update writes (seed:
// "rejects payloads larger than 8 KiB").
const maxSelfUpdate = 8 << 10

// selfUpdatable are the only controls agent.update may replace: the
// authority-free prompt controls. Every other control (policy, mount,
// model, window, the identity files...) stays the host's.
var selfUpdatable = map[string]bool{"system.md": true, "prompt.template.md": true}

// hostOperation does, for a call it brokered, what the tool cannot do
// inside the sandbox. It is asked on the call's own channel, which only
// the call's process holds, for the call's own tool, once: the call can do
// no more than it was already allowed to. Everything is decided and
// validated again here, on the host, never taken from the tool.
func (b *Broker) hostOperation(c *brokerCall, op *broker.HostOp) broker.Reply {
	b.mu.Lock()
	valid := c.tool == op.Op && !c.opDone
	if valid {
		c.opDone = true
	}
	b.mu.Unlock()
	if !valid {
		return broker.Reply{Exit: cli.Denied, Errno: "EACCES", Error: op.Op + ": permission denied: not the operation of this call, or not its first"}
	}
	switch op.Op {
	case "agent.update":
		return b.agentUpdate(op.Input)
	case "agent.create":
		return b.AgentCreate(op.Input)
	case "agent.start":
		return b.agentStart(op.Input)
	case "agent.stop":
		return b.agentStop(op.Input)
	}
	return broker.Reply{Exit: cli.Usage, Errno: "EINVAL", Error: op.Op + ": not an operation of the run host"}
}

// strictDecode decodes one JSON object into v, refusing unknown fields and
// trailing data.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

func invalid(tool, format string, args ...any) broker.Reply {
	return broker.Reply{Exit: cli.Usage, Errno: "EINVAL", Error: tool + ": " + fmt.Sprintf(format, args...)}
}

// agentUpdate replaces system.md or prompt.template.md of the calling
// agent, atomically, in its own control directory. The request names no
// agent: it is the run's.
func (b *Broker) agentUpdate(input []byte) broker.Reply {
	var in struct {
		Control   string `json:"control"`
		Content   string `json:"content"`
		RequestID string `json:"request_id"`
	}
	if err := strictDecode(input, &in); err != nil {
		return invalid("agent.update", "input: %v", err)
	}
	switch {
	case !selfUpdatable[in.Control]:
		return invalid("agent.update", "control %q is the host's; an agent updates only its own system.md or prompt.template.md", in.Control)
	case len(in.Content) > maxSelfUpdate:
		return invalid("agent.update", "content is %d bytes; at most %d", len(in.Content), maxSelfUpdate)
	case !utf8.ValidString(in.Content) || strings.IndexByte(in.Content, 0) >= 0:
		return invalid("agent.update", "content must be UTF-8 text without NUL")
	}
	if in.RequestID != "" {
		b.mu.Lock()
		replay := b.requestIDs[in.RequestID]
		if b.requestIDs == nil {
			b.requestIDs = map[string]bool{}
		}
		b.requestIDs[in.RequestID] = true
		b.mu.Unlock()
		if replay {
			return broker.Reply{Exit: cli.Failure, Errno: "EALREADY", Error: "agent.update: request " + in.RequestID + " was already applied; nothing written"}
		}
	}
	r := b.R
	path := filepath.Join(r.Root.AgentControl(r.Agent.Name), in.Control)
	if err := fsops.WriteAtomic(path, []byte(in.Content), 0o644); err != nil {
		return broker.Reply{Exit: cli.Failure, Errno: "EIO", Error: "agent.update: " + err.Error()}
	}
	sum := sha256.Sum256([]byte(in.Content))
	r.recordEvent(fsops.Event{Type: "agent.update", Object: "agent/" + r.Agent.Name, Status: "ok",
		Detail: fmt.Sprintf("control=%s bytes=%d sha256=%s", in.Control, len(in.Content), hex.EncodeToString(sum[:8]))})
	return broker.Reply{Output: fmt.Sprintf("updated agent/%s.d/%s (%d bytes); the next run renders it", r.Agent.Name, in.Control, len(in.Content))}
}

// childOf loads agent name and checks it is a child of the calling agent
// that the caller's policy lets it perm (start or stop).
func (b *Broker) childOf(tool, name string, perm policy.Permission) (*policy.Agent, *broker.Reply) {
	if err := policy.ValidName(name); err != nil {
		r := invalid(tool, "name: %v", err)
		return nil, &r
	}
	r := b.R
	caller, err := authority.LoadAgent(r.Root, r.Agent.Name)
	if err != nil {
		return nil, &broker.Reply{Exit: cli.Unavailable, Errno: "EIO", Error: tool + ": " + err.Error()}
	}
	if !caller.Policy.Allows(caller.Subject, policy.Object{Class: policy.ClassAgent, Name: name}, perm) {
		return nil, &broker.Reply{Exit: cli.Denied, Errno: "EACCES",
			Error: fmt.Sprintf("%s: permission denied (agent-policy): %s's policy has no allow %s agent:%s %s", tool, caller.Name, caller.Subject, name, perm)}
	}
	child, err := authority.LoadAgent(r.Root, name)
	if err != nil {
		return nil, &broker.Reply{Exit: cli.NotFound, Errno: "ENOENT", Error: tool + ": " + err.Error()}
	}
	if child.Parent.Agent != caller.Name {
		return nil, &broker.Reply{Exit: cli.Denied, Errno: "EACCES",
			Error: fmt.Sprintf("%s: permission denied (agent-policy): agent %s is not a child of %s", tool, name, caller.Name)}
	}
	return child, nil
}

// childReady bounds the wait for a started child to be ready.
const childReady = 10 * time.Second

// agentStart starts a child of the calling agent: its own run host (ctx
// agent start CHILD --no-console), a child process of this run host, so
// the child's sandbox is built from the child's own, attenuated definition.
func (b *Broker) agentStart(input []byte) broker.Reply {
	var in struct {
		Name    string   `json:"name"`
		Session string   `json:"session"`
		Command []string `json:"command"`
	}
	if err := strictDecode(input, &in); err != nil {
		return invalid("agent.start", "input: %v", err)
	}
	if in.Session != "" && policy.ValidName(in.Session) != nil {
		return invalid("agent.start", "session %q is not a valid name", in.Session)
	}
	child, refusal := b.childOf("agent.start", in.Name, policy.PermStart)
	if refusal != nil {
		return *refusal
	}
	r := b.R
	b.mu.Lock()
	live := len(b.children)
	_, running := b.children[child.Name]
	b.mu.Unlock()
	if running {
		return broker.Reply{Exit: cli.Unavailable, Errno: "EBUSY", Error: "agent.start: agent " + child.Name + " is already running"}
	}
	if max := r.budgets.limits.Get("children"); uint64(live) >= max {
		r.budgetExceeded("children", "agent.start of "+child.Name+" refused")
		return broker.Reply{Exit: cli.Denied, Errno: "EAGAIN",
			Error: fmt.Sprintf("agent.start: budget children=%d reached; agent %s not started", max, child.Name)}
	}
	self, err := fsops.Executable()
	if err != nil {
		return broker.Reply{Exit: cli.Internal, Errno: "EIO", Error: "agent.start: " + err.Error()}
	}
	args := []string{"ctx", "agent", "start", "--root", r.Root.Dir, child.Name, "--no-console", "--cwd", r.workspace}
	if in.Session != "" {
		args = append(args, "--session", in.Session)
	}
	if len(in.Command) > 0 {
		args = append(append(args, "--"), in.Command...)
	}
	cmd := &exec.Cmd{Path: self, Args: args, Env: []string{"PATH=/usr/bin:/bin"}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return broker.Reply{Exit: cli.Unavailable, Errno: "EIO", Error: "agent.start: " + err.Error()}
	}
	b.mu.Lock()
	if b.children == nil {
		b.children = map[string]*exec.Cmd{}
	}
	b.children[child.Name] = cmd
	b.mu.Unlock()
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		b.mu.Lock()
		if b.children[child.Name] == cmd {
			delete(b.children, child.Name)
		}
		b.mu.Unlock()
		exited <- err
	}()
	deadline := time.Now().Add(childReady)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return broker.Reply{Exit: cli.Unavailable, Errno: "EIO",
				Error: fmt.Sprintf("agent.start: agent %s ended before it was ready (%s); see its log", child.Name, waitText(err))}
		case <-time.After(50 * time.Millisecond):
		}
		if st, _ := fsops.ReadControl(filepath.Join(r.Root.AgentControl(child.Name), "status")); strings.TrimSpace(string(st)) == "ready" {
			r.recordEvent(fsops.Event{Type: "agent.start", Object: "agent/" + child.Name, Status: "ok",
				Detail: fmt.Sprintf("started by agent %s, run host pid %d", r.Agent.Name, cmd.Process.Pid)})
			return broker.Reply{Output: fmt.Sprintf("started agent/%s (run host pid %d)", child.Name, cmd.Process.Pid)}
		}
	}
	return broker.Reply{Output: fmt.Sprintf("starting agent/%s (run host pid %d; not ready after %s)", child.Name, cmd.Process.Pid, childReady)}
}

func waitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// agentStop stops a child this run started, and its owned and temp
// descendants first.
func (b *Broker) agentStop(input []byte) broker.Reply {
	var in struct {
		Name string `json:"name"`
	}
	if err := strictDecode(input, &in); err != nil {
		return invalid("agent.stop", "input: %v", err)
	}
	child, refusal := b.childOf("agent.stop", in.Name, policy.PermStop)
	if refusal != nil {
		return *refusal
	}
	b.mu.Lock()
	cmd, ours := b.children[child.Name]
	b.mu.Unlock()
	if !ours {
		return broker.Reply{Exit: cli.Unavailable, Errno: "ESRCH", Error: "agent.stop: agent " + child.Name + " was not started by this run"}
	}
	var out bytes.Buffer
	e := &cli.Env{Name: "agent.stop", Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
	code := lifecycle.StopTree(e, b.R.Root, child.Name, map[string]bool{})
	if code == cli.OK {
		// Stopped: no longer a child this run has running, now, not when
		// the goroutine waiting for it gets to run (the run's end would
		// otherwise still end it, and remove a temp child's definition).
		b.mu.Lock()
		if b.children[child.Name] == cmd {
			delete(b.children, child.Name)
		}
		b.mu.Unlock()
	}
	b.R.recordEvent(fsops.Event{Type: "agent.stop", Object: "agent/" + child.Name, Status: "ok",
		Detail: "stopped by agent " + b.R.Agent.Name})
	if code != cli.OK {
		return broker.Reply{Exit: code, Errno: "EIO", Error: "agent.stop: " + strings.TrimSpace(out.String())}
	}
	return broker.Reply{Output: strings.TrimSpace(out.String())}
}

// endChildren ends, with the caller's run, the children it started whose
// life is owned or temp, and removes the definition of temp ones (their
// history stays in their homes).
func (r *AgentRun) endChildren() {
	b := r.broker
	if b == nil {
		return
	}
	b.mu.Lock()
	names := make([]string, 0, len(b.children))
	for name := range b.children {
		names = append(names, name)
	}
	b.mu.Unlock()
	for _, name := range names {
		child, err := authority.LoadAgent(r.Root, name)
		if err != nil || (child.Life != policy.LifeOwned && child.Life != policy.LifeTemp) {
			continue
		}
		var out bytes.Buffer
		e := &cli.Env{Name: "agent.stop", Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
		lifecycle.StopTree(e, r.Root, name, map[string]bool{})
		if child.Life == policy.LifeTemp {
			os.RemoveAll(r.Root.AgentControl(name))
			os.Remove(r.Root.Path("agent", name))
			fsops.SyncDir(r.Root.AgentDir())
		}
	}
}
