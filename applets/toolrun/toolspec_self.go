package toolrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/fsops/sandbox"
	"ctx/policy/sandboxplan"
	"ctx/policy/schema"
)

// A third-party tool without a schema control may describe itself, by
// either convention of the agentrc profile: it answers --agentrc-schema,
// or it ships NAME.toolspec.json beside its executable. ctx reads the flag
// first, then the sibling, validates what it read, and shows it in
// /mnt/tools/NAME.toolspec.json, whence tsh help and ctxmcp serve inside
// the run take it. A schema control, where there is one, always wins: it
// is the administrator's, checked at install.
//
// Asking the flag runs the tool, so it is run the way its calls are, never
// as the run host: as the agent's uid (never host root), in a session of
// its own, through ctx-confine (no_new_privs, the seccomp filter without
// network, Landlock with nothing writable), with no input, an empty
// environment, / as its directory, at most selfSchemaTimeout and
// selfSchemaOutput bytes, and its whole process tree killed at the end.
// The answer is cached by the executable's device, inode, mtime and size
// in the caller's runtime directory, so a tool is asked once, and again
// only when it is replaced.
const (
	selfSchemaTimeout = 2 * time.Second
	selfSchemaOutput  = 64 << 10
)

// selfSpec is a tool's own description: its input schema and, when it
// gave one, its output schema.
type selfSpec struct {
	Input, Output json.RawMessage
}

// parseSelfSpec reads what a tool said of itself: a toolspec (an object
// with inputSchema, and outputSchema or output), an {"input","output"}
// pair, or a bare JSON Schema of its arguments. Each schema must be a JSON
// object that compiles.
func parseSelfSpec(b []byte) (selfSpec, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return selfSpec{}, fmt.Errorf("not one JSON object: %v", err)
	}
	var s selfSpec
	switch {
	case obj["inputSchema"] != nil:
		s.Input, s.Output = obj["inputSchema"], obj["outputSchema"]
	case obj["input"] != nil:
		s.Input, s.Output = obj["input"], obj["output"]
	default:
		s.Input = b
	}
	for _, part := range []struct {
		name string
		v    *json.RawMessage
	}{{"input schema", &s.Input}, {"output schema", &s.Output}} {
		if *part.v == nil {
			continue
		}
		o := jsonObject(*part.v)
		if o == nil {
			return selfSpec{}, fmt.Errorf("%s is not a JSON object", part.name)
		}
		if _, err := schema.Compile(o); err != nil {
			return selfSpec{}, fmt.Errorf("%s: %v", part.name, err)
		}
		*part.v = o
	}
	return s, nil
}

// SelfDescribed returns the description tool hit gives of itself, and
// where it came from ("flag" or "sibling"); ok is false when it gives
// none that is valid.
func SelfDescribed(hit fsops.ToolHit, uid, gid uint32) (selfSpec, string, bool) {
	if b, ok := askSelfSchema(hit, uid, gid); ok {
		if s, err := parseSelfSpec(b); err == nil {
			return s, "flag", true
		}
	}
	b, err := fsops.ReadControl(filepath.Join(hit.Dir, hit.Name+".toolspec.json"))
	if err != nil {
		return selfSpec{}, "", false
	}
	if s, err := parseSelfSpec(b); err == nil {
		return s, "sibling", true
	}
	return selfSpec{}, "", false
}

// askSelfSchema is the tool's answer to --agentrc-schema, from the cache
// or by asking it (runSelfSchema); ok is false for no valid answer.
func askSelfSchema(hit fsops.ToolHit, uid, gid uint32) ([]byte, bool) {
	fi, err := os.Lstat(hit.Path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, false
	}
	cache := ""
	if rt, err := fsops.RuntimeDir(os.Getuid()); err == nil {
		dir := filepath.Join(rt, "toolspec")
		if os.MkdirAll(dir, 0o700) == nil {
			cache = filepath.Join(dir, fmt.Sprintf("%d-%d-%d.%d-%d", st.Dev, st.Ino, st.Mtim.Sec, st.Mtim.Nsec, st.Size))
		}
	}
	if cache != "" {
		if b, err := fsops.ReadRegular(cache, selfSchemaOutput+1); err == nil {
			return b, len(b) > 0 // an empty entry: asked before, no valid answer
		}
	}
	b, ok := runSelfSchema(hit, uid, gid)
	if ok {
		if _, err := parseSelfSpec(b); err != nil {
			b, ok = nil, false
		}
	}
	if cache != "" {
		fsops.WriteAtomic(cache, b, 0o600)
	}
	return b, ok
}

// runSelfSchema runs `TOOL --agentrc-schema` confined (see above) and
// returns its standard output when it exits 0 within the bounds.
func runSelfSchema(hit fsops.ToolHit, uid, gid uint32) ([]byte, bool) {
	root := os.Getuid() == 0
	if root && uid == 0 {
		return nil, false // never as host root
	}
	self, err := fsops.Executable()
	if err != nil {
		return nil, false
	}
	rules, err := os.CreateTemp("", "ctx-selfschema-")
	if err != nil {
		return nil, false
	}
	rules.Close()
	defer os.Remove(rules.Name())
	if sandbox.WriteConfineRules(rules.Name(), nil) != nil {
		return nil, false
	}
	// A session of its own, killed with the run host; as root also a pid
	// namespace of its own, which the kernel empties when the tool exits.
	attr := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if root {
		if os.Chown(rules.Name(), int(uid), int(gid)) != nil {
			return nil, false
		}
		attr.Credential = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
		attr.Cloneflags = syscall.CLONE_NEWPID
	}
	out := &proc.Capped{Limit: selfSchemaOutput}
	cmd := &exec.Cmd{Path: self, Args: []string{sandbox.ConfineApplet, sandbox.ConfineNoNetwork, hit.Path, hit.Name, "--agentrc-schema"},
		Env: []string{"PATH=/usr/bin:/bin", sandbox.ConfineLandlockEnv + "=" + rules.Name()}, Dir: "/",
		Stdout: out, SysProcAttr: attr, WaitDelay: 100 * time.Millisecond}
	// Not proc.StartTree: its sweep takes every new child of the run host
	// for the tree's, and the sandbox's init starts beside this.
	if err := cmd.Start(); err != nil {
		return nil, false
	}
	pid := cmd.Process.Pid
	timer := time.AfterFunc(selfSchemaTimeout, func() { proc.KillGroup(pid); proc.KillTree(pid, -1) })
	err = cmd.Wait()
	timer.Stop()
	proc.KillGroup(pid) // what it left in its session
	b := bytes.TrimSpace(out.Bytes())
	if err != nil || out.Truncated() || len(b) == 0 || !strings.HasPrefix(string(b), "{") {
		return nil, false
	}
	return b, true
}

// SelfToolSpec is the toolspec of a tool that described itself: its
// description control when it has one, and the schemas it gave.
func SelfToolSpec(t sandboxplan.ProjectedTool, s selfSpec) []byte {
	spec := struct {
		Name         string          `json:"name"`
		Description  string          `json:"description,omitempty"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	}{Name: t.Name, InputSchema: s.Input, OutputSchema: s.Output}
	if d, err := fsops.ReadControl(filepath.Join(t.HostDotD, "description")); err == nil {
		spec.Description = strings.TrimSpace(string(d))
	}
	return toolSpecJSON(spec)
}

// MntSelfSchema is, inside a run, the input schema tool hit described
// itself with, read from the toolspec its run host wrote; nil elsewhere.
func MntSelfSchema(hit fsops.ToolHit) json.RawMessage {
	p, ok := sandboxplan.MntToolSpecPath(hit.Name, func(p string) bool { _, err := os.Lstat(p); return err == nil })
	if !ok {
		return nil
	}
	b, err := fsops.ReadControl(p)
	if err != nil {
		return nil
	}
	var spec struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if json.Unmarshal(b, &spec) != nil {
		return nil
	}
	return jsonObject(spec.InputSchema)
}
