package lifecycle

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// RunAgentStop is `ctx agent stop [--root DIR] NAME`: end the agent's run
// (SIGTERM to its run host, which passes it on to every process of the
// sandbox; SIGKILL after the grace period) and, first, the runs of its
// owned and temp descendants the same way. History is never deleted.
func RunAgentStop(e *cli.Env, args []string) int {
	root, a, code, ok := AgentArgs(e, args, cli.NewFlags())
	if !ok {
		return code
	}
	uid := os.Getuid()
	if uid != 0 && uint32(uid) != a.Owner {
		return cli.Fail(e, cli.Denied, "agent %s belongs to uid %d; only its owner or root may stop it", a.Name, a.Owner)
	}
	return StopTree(e, root, a.Name, map[string]bool{})
}

// StopTree stops the descendants of name whose life is owned or temp
// (post-order: children before their parent), then name itself.
func StopTree(e *cli.Env, root fsops.Root, name string, seen map[string]bool) int {
	if seen[name] {
		return cli.OK // a parent cycle: each agent is stopped once
	}
	seen[name] = true
	code := cli.OK
	for _, child := range ChildrenOf(root, name) {
		if child.Life == policy.LifeOwned || child.Life == policy.LifeTemp {
			if c := StopTree(e, root, child.Name, seen); c != cli.OK {
				code = c
			}
		}
	}
	if c := stopOne(e, root, name); c != cli.OK {
		code = c
	}
	return code
}

// ChildrenOf lists the agents whose parent control names name.
func ChildrenOf(root fsops.Root, name string) []*policy.Agent {
	entries, _ := os.ReadDir(root.AgentDir())
	var out []*policy.Agent
	for _, en := range entries {
		child, ok := strings.CutSuffix(en.Name(), ".d")
		if !ok || !en.IsDir() || child == name {
			continue
		}
		a, err := authority.LoadAgent(root, child)
		if err == nil && a.Parent.Agent == name {
			out = append(out, a)
		}
	}
	return out
}

// RunHostPid returns the pid of the live run host of agent name, or 0.
func RunHostPid(root fsops.Root, name string) int {
	b, err := fsops.ReadControl(filepath.Join(root.AgentControl(name), "pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	// The pid must still be a run host of this agent, not a process that
	// reused the number: its command line is `... agent start ... NAME`
	// (or `... ctxmcp serve ... NAME`, which hosts a run for its client).
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return 0
	}
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	hasStart, hasName := false, false
	for _, a := range args {
		hasStart = hasStart || string(a) == "start" || string(a) == "serve"
		hasName = hasName || string(a) == name
	}
	if !hasStart || !hasName {
		return 0
	}
	return pid
}

func stopOne(e *cli.Env, root fsops.Root, name string) int {
	pid := RunHostPid(root, name)
	if pid == 0 {
		markDead(root, name)
		fmt.Fprintf(e.Stdout, "%s: not running\n", name)
		return cli.OK
	}
	proc, err := fsops.OpenProcess(pid)
	if err != nil {
		return cli.Fail(e, cli.Failure, "agent %s (pid %d): %v", name, pid, err)
	}
	defer proc.Close()
	proc.Signal(syscall.SIGTERM)
	// The run host kills its sandbox after its own grace period; give it
	// that and a little more before killing the host itself (its sandbox
	// dies with it: Pdeathsig).
	if !proc.Wait(StopGrace + 2*time.Second) {
		proc.Signal(syscall.SIGKILL)
		proc.Wait(2 * time.Second)
		markDead(root, name)
		fsops.AppendLogEvent(filepath.Join(root.AgentControl(name), "log"),
			fsops.Event{Type: "agent.stop", Agent: name, Object: "agent/" + name, Status: "killed"})
	}
	fmt.Fprintf(e.Stdout, "%s: stopped\n", name)
	return cli.OK
}

// markDead records a run that is gone without its host having said so.
func markDead(root fsops.Root, name string) {
	dir := root.AgentControl(name)
	if b, err := fsops.ReadControl(filepath.Join(dir, "status")); err == nil && strings.TrimSpace(string(b)) != "dead" && strings.TrimSpace(string(b)) != "idle" {
		fsops.WriteAtomic(filepath.Join(dir, "status"), []byte("dead\n"), 0o644)
		fsops.WriteAtomic(filepath.Join(dir, "pid"), nil, 0o644)
	}
}

// StopGrace is how long a run gets between SIGTERM and SIGKILL.
const StopGrace = 5 * time.Second
