package fsops

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/policy"
)

// SandboxInitApplet is the hidden applet the sandbox child runs as: the
// parent re-executes this binary with this argv[0] inside new namespaces.
const SandboxInitApplet = "ctx-sandbox-init"

// Descriptors the sandbox child receives.
const (
	RunFD  = 3 // the run capability socket, passed on to the agent as CTX_RUN_FD
	planFD = 4 // the plan, JSON, then the release byte (Release); read by the child and closed
	// idmapFD (5): the idmapped workspace tree, when the plan has one.
)

// Sandbox is a plan about to be applied in a new child process.
type Sandbox struct {
	Cmd     *exec.Cmd
	plan    []byte
	planW   *os.File
	release chan struct{}
	once    sync.Once
}

// releaseByte follows the plan on its pipe when the run host lets the
// init start the program.
const releaseByte = 'g'

// NewSandbox prepares a child that applies plan. The caller may set Cmd's
// Stdin/Stdout/Stderr, Cmd.SysProcAttr.Setsid/Setctty/Ctty, and the run
// capability (SetRunFile) before Start.
func NewSandbox(plan *policy.Plan) (*Sandbox, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	self, err := Executable()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: self, Args: []string{SandboxInitApplet}}
	// The child starts with nothing from our environment: the plan carries
	// the agent's environment, and init sets it only for the agent.
	cmd.Env = []string{}
	attr := &syscall.SysProcAttr{
		// If the run host dies, so does the sandbox: nothing outlives it.
		Pdeathsig: syscall.SIGKILL,
		// Always a session of its own: the agent never shares the
		// caller's controlling terminal (TIOCSTI, job control signals).
		// ctxterm makes it the PTY's session leader instead.
		Setsid: true,
	}
	ns := plan.Namespaces
	for _, f := range []struct {
		on   bool
		flag uintptr
	}{{ns.User, syscall.CLONE_NEWUSER}, {ns.Mount, syscall.CLONE_NEWNS}, {ns.PID, syscall.CLONE_NEWPID},
		{ns.UTS, syscall.CLONE_NEWUTS}, {ns.IPC, syscall.CLONE_NEWIPC}, {ns.Net, syscall.CLONE_NEWNET}} {
		if f.on {
			attr.Cloneflags |= f.flag
		}
	}
	if ns.User {
		// The new user namespace maps the agent's uid and gid onto the
		// caller's own (the only ids an unprivileged caller may map), and
		// owns the other new namespaces: that is what lets an unprivileged
		// caller mount. The init keeps, as ambient capabilities across its
		// execve, exactly what building the sandbox needs; it drops them all
		// before the agent's program starts.
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: int(plan.UID), HostID: int(plan.OuterUID), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: int(plan.GID), HostID: int(plan.OuterGID), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_NET_ADMIN}
	}
	cmd.SysProcAttr = attr
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// 3 the run capability, 4 the plan, 5 the idmapped workspace, 6 the
	// broker's order channel: each set by its setter, nil (closed) if not.
	cmd.ExtraFiles = []*os.File{nil, r, nil, nil}
	return &Sandbox{Cmd: cmd, plan: data, planW: w, release: make(chan struct{})}, nil
}

// SetRunFile passes f to the sandbox as descriptor RunFD.
func (s *Sandbox) SetRunFile(f *os.File) { s.Cmd.ExtraFiles[0] = f }

// SetIDMappedWorkspace passes the workspace tree IDMappedTree made (the
// plan's IDMap says one comes) as descriptor 5.
func (s *Sandbox) SetIDMappedWorkspace(f *os.File) { s.Cmd.ExtraFiles[2] = f }

// SetBrokerChannel passes the init's end of the broker's order channel
// (NewBrokerChannel) as descriptor 6.
func (s *Sandbox) SetBrokerChannel(f *os.File) { s.Cmd.ExtraFiles[3] = f }

// Start starts the child and hands it the plan.
func (s *Sandbox) Start() error {
	if err := s.Cmd.Start(); err != nil {
		s.Cmd.ExtraFiles[1].Close()
		s.planW.Close()
		return fmt.Errorf("starting the sandbox: %w", err)
	}
	s.SendPlan()
	s.Release()
	return nil
}

// SendPlan hands the plan to a child started by someone else (ctxterm
// starts it on a PTY). Call it exactly once, after the start. The init
// builds the sandbox from it at once, but starts the program only after
// Release: the run host puts the init into the run's cgroup meanwhile,
// and the program and everything it starts are born inside.
func (s *Sandbox) SendPlan() {
	// Our copy of the read end must go, so the child sees EOF after us.
	s.Cmd.ExtraFiles[1].Close()
	go func() {
		s.planW.Write(s.plan)
		<-s.release
		s.planW.Write([]byte{releaseByte})
		s.planW.Close()
	}()
}

// Release lets the init start the program (after SendPlan). A run host
// that never releases (it died, or killed the init) leaves the init to
// see the end of the pipe instead, and end the run.
func (s *Sandbox) Release() {
	s.once.Do(func() { close(s.release) })
}
