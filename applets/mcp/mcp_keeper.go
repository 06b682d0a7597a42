package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/object"
	"ctx/mcpstdio"
	"ctx/policy"
)

// Warm MCP servers (ctx man ctxmcp, WARM SERVERS). Inside an agent's run a
// projected tool does not start its server itself: it calls through the
// run's keeper of that server, a ctx process (this hidden applet) that
// holds one live session (mcpstdio.Keeper) and serves every call of the
// run from it. The first call starts the keeper, detached from its own
// process tree (a new session) so that it outlives the call: the run's
// init inherits it, and kills and reaps it, with the server's whole tree,
// when the run ends. Outside a run a call starts its server and ends it,
// as always.
//
// The keeper of a server listens at DIR/KEY.sock, where DIR is
// TMP/ctx-mcp-RUN (TMP the run's /tmp in a sandbox, $HOME/tmp in iso
// landlock; RUN a digest of the run id), a directory of the caller's uid
// and mode 0700, and KEY a digest of the server's name, its entry digest
// and the call's working directory (the server starts there).
// DIR/KEY.lock serialises starting it.

// McpKeeperApplet is the hidden applet a keeper runs as.
const McpKeeperApplet = "ctx-mcp-keeper"

// keeperExecutable is the binary a keeper is started from; "" is this one
// (fsops.Executable). Tests of this package set the ctx binary.
var keeperExecutable = ""

const (
	// keeperReadyWait bounds a keeper's start, up to its socket listening.
	keeperReadyWait = 10 * time.Second
	// keeperLockWait bounds the wait for another call starting the keeper.
	keeperLockWait = 15 * time.Second
	// keeperCheckEvery is how often a keeper checks that its run and its
	// socket are still there.
	keeperCheckEvery = 2 * time.Second
)

// keeperStart is what a keeper reads on its standard input.
type keeperStart struct {
	Spec     mcpstdio.KeeperSpec `json:"spec"`
	Socket   string              `json:"socket"`
	Identity string              `json:"identity"` // the run's identity file
	Run      string              `json:"run"`      // the run id it holds
	// Ancestor is the parent of the call that started the keeper, the
	// run's init when the run host brokers the call: only its
	// descendants are served.
	Ancestor int `json:"ancestor"`
}

// agentRunInfo is the run a process is in, for warm servers.
type agentRunInfo struct {
	id       string
	identity string // its identity file
	tmp      string // where its keepers' directory goes
}

// currentRun finds the agent run this process is in: the identity at
// /mnt/proc/identity (a sandbox with namespaces), else at
// $CTX_RUN_DIR/identity (iso landlock). iso shared and a person's process
// have neither: no run.
func currentRun(e *cli.Env) (agentRunInfo, bool) {
	path := policy.IdentityPath
	b, err := fsops.ReadRegular(path, 64<<10)
	if err != nil {
		d := e.Getenv("CTX_RUN_DIR")
		if d == "" || !filepath.IsAbs(d) {
			return agentRunInfo{}, false
		}
		path = filepath.Join(filepath.Clean(d), "identity")
		if b, err = fsops.ReadRegular(path, 64<<10); err != nil {
			return agentRunInfo{}, false
		}
	}
	id, err := policy.ParseIdentity(b)
	if err != nil {
		return agentRunInfo{}, false
	}
	// The same place for every call of the run, whatever its caller kept
	// of the environment (tsh passes HOME, not TMPDIR): a sandbox's /tmp
	// is the run's own; an iso landlock run has the host's /tmp, and its
	// TMPDIR is HOME/tmp.
	tmp := "/tmp"
	if path != policy.IdentityPath {
		switch home, t := e.Getenv("HOME"), e.Getenv("TMPDIR"); {
		case filepath.IsAbs(home):
			tmp = filepath.Join(home, "tmp")
		case filepath.IsAbs(t):
			tmp = t
		}
	}
	return agentRunInfo{id: id.Run, identity: path, tmp: filepath.Clean(tmp)}, true
}

// runStillThere reports whether identity still names run.
func runStillThere(identity, run string) bool {
	b, err := fsops.ReadRegular(identity, 64<<10)
	if err != nil {
		return false
	}
	id, err := policy.ParseIdentity(b)
	return err == nil && id.Run == run
}

// keeperDir returns the run's keeper directory, made if need be; false
// when it cannot be made or is not a directory of ours, mode 0700.
func keeperDir(run agentRunInfo) (string, bool) {
	sum := sha256.Sum256([]byte(run.id))
	dir := filepath.Join(run.tmp, "ctx-mcp-"+hex.EncodeToString(sum[:6]))
	err := os.Mkdir(dir, 0o700)
	made := err == nil
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", false
	}
	if !privateDir(dir) {
		return "", false
	}
	if made {
		pruneKeeperDirs(run.tmp, dir)
	}
	return dir, true
}

// privateDir reports whether dir is a directory (not a symlink) of our
// uid that no one else may enter.
func privateDir(dir string) bool {
	return fsops.PrivateDir(dir)
}

// pruneKeeperDirs removes what earlier runs left in tmp (an iso landlock
// run's TMPDIR outlives it): a keeper directory of ours, older than a
// minute, none of whose sockets has a listener.
func pruneKeeperDirs(tmp, keep string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, ent := range entries {
		dir := filepath.Join(tmp, ent.Name())
		if !strings.HasPrefix(ent.Name(), "ctx-mcp-") || dir == keep || !privateDir(dir) {
			continue
		}
		if info, err := ent.Info(); err != nil || time.Since(info.ModTime()) < time.Minute {
			continue
		}
		files, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		live := false
		for _, f := range files {
			if strings.HasSuffix(f.Name(), ".sock") {
				if _, err := mcpstdio.DialKeeper(filepath.Join(dir, f.Name()), mcpstdio.KeeperSpec{}); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
					live = true
				}
			}
		}
		if live {
			continue
		}
		for _, f := range files {
			os.Remove(filepath.Join(dir, f.Name()))
		}
		os.Remove(dir)
	}
}

// warmKeeper returns a connection to the run's keeper of srv, starting
// the keeper when there is none (or only a stale socket); nil outside a
// run, or when the warm path cannot be had (the call then goes cold).
func warmKeeper(ctx context.Context, e *cli.Env, loc object.Locator, srv mcpstdio.ServerConfig) *mcpstdio.KeeperConn {
	run, ok := currentRun(e)
	if !ok {
		return nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil
	}
	dir, ok := keeperDir(run)
	if !ok {
		return nil
	}
	spec := mcpstdio.KeeperSpec{Name: loc.Server, Server: srv, Cwd: cwd}
	sum := sha256.Sum256([]byte(spec.Name + "\x00" + mcpstdio.EntryDigest(srv) + "\x00" + cwd))
	key := hex.EncodeToString(sum[:8])
	sock := filepath.Join(dir, key+".sock")
	if kc, err := mcpstdio.DialKeeper(sock, spec); err == nil {
		return kc
	}
	// None, or not one to use: start it, one call at a time.
	lock, err := os.OpenFile(filepath.Join(dir, key+".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil
	}
	defer lock.Close() // and so unlocked
	for waited := time.Duration(0); ; waited += 10 * time.Millisecond {
		err := fsops.TryLock(lock)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR || waited > keeperLockWait || ctx.Err() != nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	if kc, err := mcpstdio.DialKeeper(sock, spec); err == nil {
		return kc // another call started it meanwhile
	}
	// A stale socket, or a keeper that is not to be used: it goes. (A
	// live keeper whose socket is taken ends by itself.)
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := startKeeper(keeperStart{Spec: spec, Socket: sock, Identity: run.identity, Run: run.id, Ancestor: os.Getppid()}); err != nil {
		return nil
	}
	kc, err := mcpstdio.DialKeeper(sock, spec)
	if err != nil {
		return nil
	}
	return kc
}

// startKeeper starts a keeper in a session of its own (so neither the
// call's process group nor a terminal's signals reach it), its standard
// streams on /dev/null, and waits until it listens.
func startKeeper(st keeperStart) error {
	self := keeperExecutable
	if self == "" {
		var err error
		if self, err = fsops.Executable(); err != nil {
			return err
		}
	}
	spec, err := json.Marshal(st)
	if err != nil {
		return err
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer specW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		specR.Close()
		return err
	}
	defer readyR.Close()
	// Its arguments only name it (in ps and to tests); the server's
	// entry, which may hold secrets, comes on its standard input.
	cmd := &exec.Cmd{Path: self, Args: []string{McpKeeperApplet, st.Spec.Name, st.Run}, Env: []string{},
		Dir: st.Spec.Cwd, Stdin: specR, Stdout: null, Stderr: null, ExtraFiles: []*os.File{readyW},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	err = cmd.Start()
	specR.Close()
	readyW.Close()
	if err != nil {
		return err
	}
	if _, err := specW.Write(spec); err != nil {
		cmd.Process.Kill()
		return err
	}
	specW.Close()
	_ = readyR.SetReadDeadline(time.Now().Add(keeperReadyWait))
	answer, _ := io.ReadAll(io.LimitReader(readyR, 4096))
	if string(answer) != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("the keeper did not start: %q", answer)
	}
	// Not waited for: when this call ends the run's init inherits it.
	return cmd.Process.Release()
}

// RunMCPKeeper is the keeper: it reads its keeperStart, listens, says
// "ready" on descriptor 3 and serves calls until the run or its socket is
// gone or it is told to end (SIGTERM, SIGHUP, SIGINT), then ends its
// server's session and tree.
func RunMCPKeeper(e *cli.Env, args []string) int {
	ready := os.NewFile(3, "ready")
	say := func(s string) {
		if ready != nil {
			io.WriteString(ready, s+"\n")
			ready.Close()
			ready = nil
		}
	}
	var st keeperStart
	data, err := io.ReadAll(io.LimitReader(e.Stdin, 4*mcpstdio.MaxConfigSize))
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil || st.Socket == "" || st.Spec.Name == "" {
		say(fmt.Sprintf("bad start: %v", err))
		return cli.Usage
	}
	ln, err := mcpstdio.ListenKeeper(st.Socket)
	if err != nil {
		say(err.Error())
		return cli.Unavailable
	}
	mine, err := os.Lstat(st.Socket)
	if err != nil {
		say(err.Error())
		return cli.Unavailable
	}
	ours := func() bool {
		now, err := os.Lstat(st.Socket)
		return err == nil && os.SameFile(now, mine)
	}
	k := mcpstdio.NewKeeper(st.Spec, mcpstdio.Options{})
	k.Ancestor = st.Ancestor
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	go func() {
		tick := time.NewTicker(keeperCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-sigs:
				ln.Close()
				return
			case <-tick.C:
				if !ours() || (st.Identity != "" && !runStillThere(st.Identity, st.Run)) {
					ln.Close()
					return
				}
			}
		}
	}()
	say("ready")
	_ = k.Serve(ln)
	k.Close()
	if ours() {
		os.Remove(st.Socket)
	}
	return cli.OK
}
