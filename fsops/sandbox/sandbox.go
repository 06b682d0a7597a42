// Package sandbox is the mechanism that applies a sandbox plan (DESIGN
// §7, §16): the run host's side that starts the init and hands it the
// plan (Sandbox), and the init itself (RunInit), which builds the mounts,
// pivots or chroots into the new root, and puts up the walls behind them:
// Landlock, the seccomp filter with its socket families and unix connect
// gate, cgroups, rlimits; with the idmapped workspace, the warm tool
// workers, the reaper and the host probes the modes are chosen by. The
// plan is package policy's; this package decides nothing, it applies.
package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/policy/sandboxplan"
)

// InitApplet is the hidden applet the sandbox child runs as: the
// parent re-executes this binary with this argv[0] inside new namespaces.
const InitApplet = "ctx-sandbox-init"

// Descriptors the sandbox child receives.
const (
	RunFD  = 3 // the run capability socket, as the agent's program gets it (CTX_RUN_FD)
	planFD = 4 // the plan channel (below)
)

// What travels on the plan channel, a stream socket, in order: one byte
// saying which descriptors the run host hands over (handoff bits), with
// those descriptors attached to it, in the bits' order; the plan
// (encodePlan); and, when the run host lets the program start,
// releaseByte. The other way, once the run has ended, the init's report
// of the program's status (endReport, Ended). The descriptors travel as
// SCM_RIGHTS rather than being inherited, so the init can be started
// before they exist: the run host starts it while it still prepares the
// run (NewFor), and sends them with the plan.
const (
	handoffRun      = 1 << iota // the run capability (a run without a broker)
	handoffIDMap                // the idmapped workspace tree (uid mode)
	handoffBroker               // the init's end of the broker's order channel
	handoffNet                  // the init's end of the egress channel (netlisten.go)
	handoffTemplate             // a copy of the kept template's tree (ctx/fsops/kept)
	handoffBits     = 5         // how many handoff bits there are
)

// releaseByte follows the plan on its channel when the run host lets the
// init start the program.
const releaseByte = 'g'

// Start is what starting a sandbox's init depends on: the
// namespaces it is born in and, in a user namespace, the ids mapped.
// Everything else comes later, with the plan.
type Start struct {
	Namespaces         sandboxplan.Namespaces
	UID, GID           uint32 // the agent's ids, inside a user namespace
	OuterUID, OuterGID uint32 // the ids they map onto
}

// StartOf is the start a plan needs.
func StartOf(plan *sandboxplan.Plan) Start {
	return Start{Namespaces: plan.Namespaces, UID: plan.UID, GID: plan.GID, OuterUID: plan.OuterUID, OuterGID: plan.OuterGID}
}

// Sandbox is a sandbox's init, about to be started or started, and what
// it will be sent.
type Sandbox struct {
	Cmd     *exec.Cmd
	start   Start
	plan    []byte
	planW   *os.File // the run host's end of the plan channel
	planR   *os.File // the init's end, closed here once the init has it
	pass    [handoffBits]*os.File
	release chan struct{}
	once    sync.Once
	sent    sync.Once
	ended   chan int // the init's report of the program's end (Ended)
}

// New prepares a child that applies plan. The caller may set Cmd's
// Stdin/Stdout/Stderr, Cmd.SysProcAttr.Setsid/Setctty/Ctty, and the
// descriptors handed over (SetRunFile, ...) before SendPlan.
func New(plan *sandboxplan.Plan) (*Sandbox, error) {
	s, err := NewFor(StartOf(plan))
	if err != nil {
		return nil, err
	}
	if err := s.SetPlan(plan); err != nil {
		s.Abandon()
		return nil, err
	}
	return s, nil
}

// NewFor prepares an init for a plan not yet made: it may be
// started at once, and given its plan (SetPlan) before SendPlan.
func NewFor(start Start) (*Sandbox, error) {
	self, err := fsops.Executable()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: self, Args: []string{InitApplet}}
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
	ns := start.Namespaces
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
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: int(start.UID), HostID: int(start.OuterUID), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: int(start.GID), HostID: int(start.OuterGID), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// CAP_NET_BIND_SERVICE: the egress listeners at ports below 1024
		// (the DNS stub's 53, forwarders at 80 and 443; netlisten.go).
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE}
	}
	cmd.SysProcAttr = attr
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	// The run host's end is non-blocking, so reading the init's report
	// can be ended by closing it (Abandon).
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, err
	}
	w, r := os.NewFile(uintptr(fds[0]), "plan-host"), os.NewFile(uintptr(fds[1]), "plan-init")
	// 3 is closed in the child (the run capability is handed over on the
	// plan channel, and the program gets it as 3 from the init); 4 is
	// the plan channel.
	cmd.ExtraFiles = []*os.File{nil, r}
	return &Sandbox{Cmd: cmd, start: start, planW: w, planR: r, release: make(chan struct{}), ended: make(chan int, 1)}, nil
}

// SetPlan gives the sandbox its plan. The plan must need the start the
// sandbox was prepared for: an init born in other namespaces than the
// plan's would build the wrong sandbox, so that is refused.
func (s *Sandbox) SetPlan(plan *sandboxplan.Plan) error {
	if err := plan.Validate(); err != nil {
		return err
	}
	if StartOf(plan) != s.start {
		return fmt.Errorf("the sandbox's init was started for other namespaces or ids than its plan's")
	}
	data, err := encodePlan(plan)
	if err != nil {
		return err
	}
	s.plan = data
	return nil
}

// SetRunFile hands f over as the run capability, which the init passes
// on to the agent's program as descriptor RunFD.
func (s *Sandbox) SetRunFile(f *os.File) { s.pass[0] = f }

// SetIDMappedWorkspace hands over the workspace tree IDMappedTree made
// (the plan's IDMap says one comes).
func (s *Sandbox) SetIDMappedWorkspace(f *os.File) { s.pass[1] = f }

// SetBrokerChannel hands over the init's end of the broker's order
// channel (broker.NewOrderChannel).
func (s *Sandbox) SetBrokerChannel(f *os.File) { s.pass[2] = f }

// SetTemplateTree hands over a copy of the kept template's tree
// (KeptTemplate) for the plan's marked ops.
func (s *Sandbox) SetTemplateTree(f *os.File) { s.pass[4] = f }

// SendPlan hands the descriptors and the plan to the started child (the
// run host started it, or ctxterm on a PTY), after SetPlan and the start;
// a second call does nothing. The init builds the sandbox from it at
// once, but starts the program only after Release: the run host puts the
// init into the run's cgroup meanwhile when it was not born there, and
// records the start; the program and everything it starts are born
// inside.
func (s *Sandbox) SendPlan() { s.sent.Do(s.sendPlan) }

func (s *Sandbox) sendPlan() {
	// Our copy of the child's end must go, so the child sees the end of
	// the channel when we close ours.
	s.planR.Close()
	var mask byte
	var fds []int
	for i, f := range s.pass {
		if f != nil {
			mask |= 1 << i
			fds = append(fds, int(f.Fd()))
		}
	}
	// The handoff is sent here, not in the goroutine: the descriptors
	// are the caller's, and may be closed once SendPlan returns.
	err := sendHandoffFile(s.planW, mask, fds)
	go func() {
		defer close(s.ended)
		defer s.planW.Close()
		if err != nil {
			return
		}
		if _, err := s.planW.Write(s.plan); err != nil {
			return
		}
		<-s.release
		if _, err := s.planW.Write([]byte{releaseByte}); err != nil {
			return
		}
		if st, ok := readEndReport(s.planW); ok {
			s.ended <- st
		}
	}()
}

// Ended yields the program's exit status as the init reports it, once
// the program and every process of the run have ended and been reaped,
// before the init itself exits (the kernel's teardown of the sandbox's
// namespaces follows, and takes a while); or it is closed without a
// value when the init reports nothing (it died, or never got its plan).
// The init's own exit status (Cmd.Wait) says the same, later.
func (s *Sandbox) Ended() <-chan int { return s.ended }

// endReport is what the init writes on the plan channel when the run has
// ended: the program's status.
const endReport = "end "

// readEndReport reads the init's report from the plan channel: "end N\n"
// and nothing else, N a status 0-255.
func readEndReport(f *os.File) (int, bool) {
	buf := make([]byte, 16)
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil || bytes.IndexByte(buf[:n], '\n') >= 0 {
			break
		}
	}
	line, ok := strings.CutPrefix(string(buf[:n]), endReport)
	if !ok || !strings.HasSuffix(line, "\n") {
		return 0, false
	}
	st, err := strconv.Atoi(strings.TrimSuffix(line, "\n"))
	if err != nil || st < 0 || st > 255 {
		return 0, false
	}
	return st, true
}

// sendHandoffFile sends the handoff byte with its descriptors on f, a
// non-blocking socket (waiting for room, as a write would).
func sendHandoffFile(f *os.File, mask byte, fds []int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		serr = sendHandoff(int(fd), mask, fds)
		return serr != unix.EAGAIN
	})
	if werr != nil {
		return werr
	}
	return serr
}

// sendHandoff sends the handoff byte with its descriptors.
func sendHandoff(fd int, mask byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		err := unix.Sendmsg(fd, []byte{mask}, oob, nil, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// Release lets the init start the program (after SendPlan). A run host
// that never releases (it died, or killed the init) leaves the init to
// see the end of the channel instead, and end the run.
func (s *Sandbox) Release() {
	s.once.Do(func() { close(s.release) })
}

// Abandon ends a sandbox whose plan will never be sent: a started init
// is killed and reaped (killed first, so it never reports the missing
// plan), and the plan channel is closed.
func (s *Sandbox) Abandon() {
	if p := s.Cmd.Process; p != nil && s.Cmd.ProcessState == nil {
		p.Kill()
		s.Cmd.Wait()
	}
	s.planR.Close()
	s.planW.Close()
}
