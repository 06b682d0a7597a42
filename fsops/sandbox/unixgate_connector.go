package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
	"ctx/policy/sandboxplan"
)

// The unix gate's connector: the process that makes, inside the run, the
// connects the gate allows and does not make itself (those to the run's
// own sockets, in the places it may write, and, with the network grant,
// inet ones). The init starts it from its locked thread when the run host
// first asks (OpConnector: most runs never connect anywhere it must, and
// it is a process of its own), so it carries the run's Landlock domain,
// seccomp filter, limits and uid: a server of the run sees a client of
// the run (SO_PEERCRED: the agent's uid, a descendant of the init),
// Landlock's scope keeps an abstract connect inside the run, and its TCP
// rules hold. It is under the gate like every process of the run; the run
// host lets a connect through to the kernel only when the caller is one
// of its threads, which the connector's pidfd, handed over with its
// channel, proves (unixgate_host.go, fromConnector). It is not dumpable,
// so no agent process of its uid can reach its memory or descriptors
// through /proc, and the agent's filter refuses ptrace. Killed, it leaves
// those connects refused (EACCES), nothing else.

// UnixConnectorApplet is the hidden applet the connector runs as.
const UnixConnectorApplet = "ctx-unix-connector"

// connectorFD is the connector's end of its channel to the run host.
const connectorFD = 3

// connectRequest is one connect for the connector: the socket (the
// caller's own, first descriptor) to connect to Addr, or, without Addr,
// to the socket file that is the second descriptor (an O_PATH one the
// gate looked up). The reply carries the ID and the errno (0: connected).
type connectRequest struct {
	ID    uint64 `json:"id"`
	Addr  []byte `json:"addr,omitempty"`
	Errno int    `json:"errno,omitempty"`
}

// startConnectorFor starts the connector on the run host's order and
// reports its channel and pidfd, or why it did not start. Once a run: a
// connector the agent killed is not replaced.
func (b *initBroker) startConnectorFor(o broker.Order) {
	rep := broker.InitReport{Op: broker.OpConnector, ID: o.ID}
	if !gateInstalled || connectorStarted {
		rep.Error = "no connector to start (no unix gate, or started once)"
		b.report(rep)
		return
	}
	connectorStarted = true
	ch, pidfd, err := startConnector(b.plan)
	if err != nil {
		rep.Error = "starting the connector: " + err.Error()
		b.report(rep)
		return
	}
	defer ch.Close()
	defer unix.Close(pidfd)
	broker.Send(int(b.ch.Fd()), rep, []int{int(ch.Fd()), pidfd})
}

// connectorStarted: this init started its connector.
var connectorStarted bool

// startConnector starts the connector from the calling (locked) thread
// and returns the host's end of its channel and the connector's pidfd.
func startConnector(plan *sandboxplan.Plan) (*os.File, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "connector"), os.NewFile(uintptr(fds[1]), "connector-end")
	defer theirs.Close()
	// Its standard descriptors are its channel and the init's stderr:
	// exec's default, /dev/null, may not exist (a chroot).
	cmd := &exec.Cmd{Path: plan.Worker, Args: []string{UnixConnectorApplet}, Env: []string{}, Dir: "/",
		Stdin: theirs, Stdout: theirs, Stderr: os.Stderr, ExtraFiles: []*os.File{theirs}}
	pidfd := -1
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: agentCredential(plan), PidFD: &pidfd}
	if err := cmd.Start(); err != nil {
		mine.Close()
		return nil, -1, err
	}
	if pidfd < 0 {
		// Without its pidfd the host could not tell the connector's
		// connects from another process's: it is not used.
		cmd.Process.Kill()
		mine.Close()
		return nil, -1, errors.New("the kernel gave no pidfd for the connector")
	}
	return mine, pidfd, nil
}

// RunUnixConnector is the connector's loop: one connect per request, each
// answered when made, until the run host closes the channel.
func RunUnixConnector() int {
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	for {
		var req connectRequest
		files, err := broker.Recv(connectorFD, &req, 2)
		if err == broker.ErrClosed || err == unix.EBADF {
			return 0
		}
		if err != nil {
			continue
		}
		go func() {
			req.Errno = int(connectFor(req, files))
			req.Addr = nil
			for _, f := range files {
				f.Close()
			}
			broker.Send(connectorFD, req, nil)
		}()
	}
}

func connectFor(req connectRequest, files []*os.File) syscall.Errno {
	switch {
	case len(files) == 1 && len(req.Addr) >= 2:
		return connectRaw(int(files[0].Fd()), req.Addr)
	case len(files) == 2 && len(req.Addr) == 0:
		sa := &unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(int(files[1].Fd()))}
		if err := unix.Connect(int(files[0].Fd()), sa); err != nil {
			if errno, ok := err.(syscall.Errno); ok {
				return errno
			}
			return unix.EINVAL
		}
		return 0
	}
	return unix.EINVAL
}

// connectorClient is the run host's side of the connector's channel.
type connectorClient struct {
	ch      *os.File
	next    atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]chan int
	gone    bool
}

func newConnectorClient(ch *os.File) *connectorClient {
	c := &connectorClient{ch: ch, pending: map[uint64]chan int{}}
	go c.read()
	return c
}

// read hands each reply to its request; when the connector is gone every
// request waiting, and every later one, is refused.
func (c *connectorClient) read() {
	for {
		var resp connectRequest
		files, err := broker.Recv(int(c.ch.Fd()), &resp, 0)
		for _, f := range files {
			f.Close()
		}
		if err == broker.ErrClosed || err == unix.EBADF {
			c.mu.Lock()
			c.gone = true
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			c.ch.Close()
			return
		}
		if err != nil {
			continue
		}
		c.mu.Lock()
		ch, ok := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if ok {
			ch <- resp.Errno
		}
	}
}

// connect has the connector connect sock to addr, or, with target >= 0,
// to the socket file target is an O_PATH descriptor of.
func (c *connectorClient) connect(sock int, addr []byte, target int) syscall.Errno {
	if c == nil {
		return unix.EACCES
	}
	id := c.next.Add(1)
	ch := make(chan int, 1)
	c.mu.Lock()
	if c.gone {
		c.mu.Unlock()
		return unix.EACCES
	}
	c.pending[id] = ch
	c.mu.Unlock()
	fds := []int{sock}
	if target >= 0 {
		fds, addr = append(fds, target), nil
	}
	if err := broker.Send(int(c.ch.Fd()), connectRequest{ID: id, Addr: addr}, fds); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return unix.EACCES
	}
	errno, ok := <-ch
	if !ok {
		return unix.EACCES
	}
	return syscall.Errno(errno)
}
