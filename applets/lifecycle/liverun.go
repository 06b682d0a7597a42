package lifecycle

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"ctx/applets/cli"
	"ctx/applets/toolrun"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// LiveRun is an agent's live run as ctx run found it: its run directory,
// identity and a connection to its broker.
type LiveRun struct {
	Dir  string
	Id   policy.Identity
	Conn int
	host *fsops.Process // nil when it could not be held
	// Secret is the run's secret, which proves to its broker that this
	// caller is the person who started the run (fsops/runsecret.go).
	Secret    string
	SecretErr error
}

func (r *LiveRun) Close() {
	if r.Conn >= 0 {
		fsops.CloseFD(r.Conn)
	}
	if r.host != nil {
		r.host.Close()
	}
}

// Ended reports whether the run host has exited.
func (r *LiveRun) Ended() bool {
	return r.host != nil && r.host.Wait(0)
}

// FindLiveRun finds the run directory of the run hosted by pid (the pid
// the run host wrote in agent/NAME.d/pid): among the run directories of
// the run host's user for this tree (RUNTIME/TREE/run/RUN: another tree's
// runs are never looked at, ctx man ctx.session) and, for iso
// landlock, of the agent's home (home/UID/agent/NAME/run/ID), those whose
// identity names the agent, the one whose broker socket is held by that
// very process (SO_PEERCRED of a connection to it). What the agent can
// write does not decide which run is reached: a directory it made would
// need a socket the run host listens on.
func FindLiveRun(e *cli.Env, root fsops.Root, a *policy.Agent, pid int) (*LiveRun, int, bool) {
	hostUID, err := fsops.ProcessUID(pid)
	if err != nil {
		return nil, cli.Fail(e, cli.Unavailable, "agent %s: its run host (pid %d) is gone: %v", a.Name, pid, err), false
	}
	me := os.Getuid()
	if me != 0 && me != hostUID {
		return nil, cli.Fail(e, cli.Denied, "agent %s is running, started by uid %d: its run host is reachable only by that user and root", a.Name, hostUID), false
	}
	// Only this tree's runs: another tree's run of an agent of the same
	// name lives under another key.
	key, err := root.RuntimeKey()
	if err != nil {
		return nil, cli.Fail(e, cli.Unavailable, "ctx tree: %v", err), false
	}
	var places []string
	if runtime, err := runtimeDirOf(hostUID); err == nil {
		places = append(places, filepath.Join(runtime, key, "run"))
	}
	places = append(places, filepath.Join(root.AgentHome(int(a.UID), a.Name), "run"))
	var dirs []string
	for _, p := range places {
		entries, _ := os.ReadDir(p)
		for _, en := range entries {
			if en.IsDir() && en.Type()&fs.ModeSymlink == 0 {
				dirs = append(dirs, filepath.Join(p, en.Name()))
			}
		}
	}
	for _, dir := range dirs {
		b, err := fsops.ReadControl(filepath.Join(dir, "identity"))
		if err != nil {
			continue
		}
		id, err := policy.ParseIdentity(b)
		if err != nil || id.Agent != a.Name {
			continue
		}
		conn, err := broker.Dial(filepath.Join(dir, broker.SocketName))
		if err != nil {
			continue
		}
		if peer, err := broker.PeerPid(conn); err != nil || peer != pid {
			fsops.CloseFD(conn)
			continue
		}
		host, _ := fsops.OpenProcess(pid)
		run := &LiveRun{Dir: dir, Id: id, Conn: conn, host: host}
		run.Secret, run.SecretErr = readRunSecret(hostUID, key, dir)
		return run, 0, true
	}
	return nil, cli.Fail(e, cli.Unavailable, "agent %s is running (pid %d) but no run directory of it with a broker is in %s (a run with iso shared has none)", a.Name, pid, strings.Join(places, " or ")), false
}

// runtimeDirOf is the runtime directory of uid's runs. A user's own is
// fsops.RuntimeDir's; root looking at another user's only looks, in the
// same places in the same order, and makes nothing (a directory root made
// there would be skipped by that user's runs as squatted).
func runtimeDirOf(uid int) (string, error) {
	if uid == os.Getuid() {
		return fsops.RuntimeDir(uid)
	}
	dir, candidates := fsops.ExistingRuntimeDir(uid)
	if dir != "" {
		return dir, nil
	}
	return "", fmt.Errorf("uid %d has no runtime directory in %s", uid, strings.Join(candidates, ", "))
}

// Call asks the run's broker to run tool with args, as a process inside the
// sandbox does (brokeredCall): the host decides on the live tree, the
// sandbox's init runs the tool as the agent, the host records the call. The
// tool's environment is the one the agent's programs start with, its
// directory the agent's working directory; the caller's own environment
// does not cross. Its standard streams are the caller's when those are
// pipes or sockets, and pipes this process copies otherwise, so no terminal
// or file of the host reaches the agent's processes (ctx man sandbox, rule 2).
func (r *LiveRun) Call(e *cli.Env, a *policy.Agent, tool string, args []string) int {
	if r.SecretErr != nil {
		return cli.Fail(e, cli.Denied, "agent %s: the run's secret cannot be read: %v", a.Name, r.SecretErr)
	}
	shielded := *e
	shielded.Stdin, shielded.Stdout, shielded.Stderr = ShieldInput(e.Stdin), ShieldOutput(e.Stdout), ShieldOutput(e.Stderr)
	fds, relay, err := toolrun.StandardDescriptors(&shielded)
	if err != nil {
		return cli.Fail(e, cli.Internal, "%v", err)
	}
	cwd := a.Cwd
	if cwd == "" {
		cwd = sandboxplan.SandboxWorkspace
	}
	env := sandboxplan.SandboxEnv(a, sandboxplan.RunSettings{Session: r.Id.Session, Run: r.Id.Run,
		Term: e.Getenv("TERM"), Lang: e.Getenv("LANG")})
	req := broker.Request{Tool: tool, Args: args, Env: env, Cwd: cwd, Secret: r.Secret}
	return toolrun.CallBroker(e, r.Conn, req, fds, relay, "agent "+a.Name+"'s run host")
}

// readRunSecret reads the secret of the run whose run directory is dir,
// from the runtime directory of its host's uid at the tree's key (root
// reads a user's).
func readRunSecret(hostUID int, key, dir string) (string, error) {
	runtime, err := runtimeDirOf(hostUID)
	if err != nil {
		return "", err
	}
	return fsops.ReadRunSecret(fsops.RunSecretPath(filepath.Join(runtime, key), filepath.Base(dir)))
}

// ShieldOutput keeps the caller's files out of the agent's reach: a
// terminal, a regular file or a device on stdout or stderr is handed to the
// program as a pipe that the host copies from, so the agent can neither
// read the person's keystrokes through a terminal, push input into it, nor
// reopen a host file through /proc/self/fd (which Landlock would refuse
// anyway, breaking `> /dev/stderr`). Pipes and sockets pass as they are.
func ShieldOutput(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && !pipeOrSocket(f) {
		return struct{ io.Writer }{f}
	}
	return w
}

// ShieldInput is shieldOutput for stdin.
func ShieldInput(rd io.Reader) io.Reader {
	if f, ok := rd.(*os.File); ok && !pipeOrSocket(f) {
		return struct{ io.Reader }{f}
	}
	return rd
}

func pipeOrSocket(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0
}
