// Package broker is the wire between the run host and the processes of
// its run (DESIGN §8): the messages a caller, a tool and the sandbox's
// init exchange with the host, the descriptors they are found at, and the
// sockets that carry them. It moves bytes and descriptors; what a message
// means for authority is the run host's to decide.
//
// The run host brokers the tool calls of its run. A process inside the
// sandbox finds the broker by path, Socket, a socket the host binds in
// the run directory that /mnt/proc shows read-only, so it needs nothing
// inherited: Python's subprocess and Node's child_process reach it as
// well as tsh. It sends one Request with its standard descriptors
// attached; the host decides against the live tree, has the sandbox's
// init execute the tool with those descriptors, records the call from
// what it decided and observed, and answers one Reply. Closing the
// connection before the reply cancels the call.
//
// Between the host and the init runs a second channel, handed to the
// init only (with its plan): the host's Orders (exec, kill, run, and
// connector and listen, which the init answers with descriptors) and the
// init's InitReports (exit, unix-gate, and those answers). Every message is one
// SOCK_SEQPACKET datagram of JSON, bounded by MaxMessage.
package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// Socket is where a process inside the sandbox finds the broker.
const Socket = "/mnt/proc/broker.sock"

// SocketName is its name in the run directory.
const SocketName = "broker.sock"

// BrokeredEnv, set by hand, asks a ctx tool to run directly instead of
// asking the broker: the tool then runs with the process's own authority
// and its own authority check, and is not recorded, which is no more than
// the process could do without the tool (ctx man sandbox). Nothing ctx
// starts sets it: a tool process the init starts on the host's order is
// told so by its order alone (a tool worker's, fsops/toolworker).
const BrokeredEnv = "CTX_BROKERED"

// MaxMessage bounds one message on either channel.
const MaxMessage = 256 << 10

// Request asks the run host to run one tool call, or (HostOp, on a
// call's host-operation channel only) to do its host operation.
type Request struct {
	Tool   string   `json:"tool"`
	Args   []string `json:"args"`
	Env    []string `json:"env"`
	Cwd    string   `json:"cwd"`
	HostOp *HostOp  `json:"host_op,omitempty"`
	Join   *Join    `json:"join,omitempty"`
	// Decide asks the host to decide a call of Tool that the caller runs
	// or refuses itself, and to record it (see Decide).
	Decide *Decide `json:"decide,omitempty"`
	// Secret is the run's secret (RunSecretPath), which a caller from
	// outside the run presents: the person's join, ctx run, ctxmcp serve
	// --agent. A process of the run sends none.
	Secret string `json:"secret,omitempty"`
}

// Decide is a call the host decides and records but does not run:
// Terminal, a terminal tool (bash, tmux, zellij) that runs in the
// caller's process on the caller's terminal (allowed: recorded as
// "started", its exit unobserved); else a call the caller refused before
// running it (tsh, ctxmcp serve), recorded as the host's own refusal, or,
// when the host would have allowed it, as refused by the caller. Nothing
// but the tool's name comes from the caller.
type Decide struct {
	Terminal bool `json:"terminal,omitempty"`
}

// Join asks the run host to start a program in its run, with the
// request's descriptors: a second ctx agent start for a running agent
// (from outside the run only). The program runs as the agent's own does;
// the run lasts until it has ended too.
type Join struct {
	Argv []string `json:"argv"`
}

// HostOp asks the run host to do, for a call it brokered, the one
// thing the tool cannot do inside the sandbox (agent.update writes the
// calling agent's prompt control, agent.create writes a child agent). It
// is sent on the call's host-operation channel, a socket pair the host
// made for that call alone and passed with its order: the host accepts
// one operation per call, of the call's own tool, and decides and
// validates it again itself.
type HostOp struct {
	Op    string          `json:"op"`
	Input json.RawMessage `json:"input"`
}

// Report is what a brokered tool adds to the host's record of its
// call: the errno, the refusing layer and a detail, which only the tool
// knows. The tool process sends it once, before it exits, on the socket
// its order came on, which only it and the init hold; the init adds it to
// the call's exit report (InitReport.Tool). The host takes these three
// fields, validated and bounded; status, exit, duration and object stay
// the host's own observations.
type Report struct {
	Errno  string `json:"errno,omitempty"`
	Layer  string `json:"layer,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// WorkerMessage is what a tool worker sends the init on its socket: the
// tool's Report before it exits, or, from a worker that stays for another
// call (fsops/toolworker/again.go), Ended: its call has ended with
// Status, its descriptors of the call are closed, and the init reports
// that as the call's exit, with the Report. The host gets the Report
// only.
type WorkerMessage struct {
	Report
	Ended  bool `json:"ended,omitempty"`
	Status int  `json:"status,omitempty"`
}

// HostPart is the part of m the host takes, nil when it says nothing.
func (m *WorkerMessage) HostPart() *Report {
	if m == nil || m.Report == (Report{}) {
		return nil
	}
	r := m.Report
	return &r
}

// Reply is the host's answer: the call's exit status and, for a call
// the host refused or could not run, the one-line reason.
type Reply struct {
	Exit   int    `json:"exit"`
	Error  string `json:"error,omitempty"`
	Errno  string `json:"errno,omitempty"`  // a host operation's errno name
	Output string `json:"output,omitempty"` // a host operation's result line
}

// Op names what a message on the order channel asks or tells.
type Op string

// The ops of the order channel: an Order's (host to init) and an
// InitReport's (init to host).
const (
	OpExec     Op = "exec"      // run a tool call (Order)
	OpKill     Op = "kill"      // cancel a call: end its process group (Order)
	OpRun      Op = "run"       // start a program joining the run (Order)
	OpExit     Op = "exit"      // an order's process ended (InitReport)
	OpUnixGate Op = "unix-gate" // the unix gate is up, its listener attached (InitReport)
	// OpConnector: start the unix gate's connector (Order); it runs, its
	// channel and pidfd attached, or Error says why not (InitReport).
	OpConnector Op = "connector"
	// OpListen: listen for a forwarder of the egress proxy at the address
	// in Path, in the run's network namespace (Order, for a port granted
	// during the run); the listener attached, or Error says why not
	// (InitReport, the order's ID).
	OpListen Op = "listen"
)

// Order is what the host tells the init (and the init a tool worker):
// run a call, cancel one, start a joining program.
type Order struct {
	Op   Op       `json:"op"`
	ID   uint64   `json:"id"`
	Path string   `json:"path,omitempty"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Cwd  string   `json:"cwd,omitempty"`
	// Worker: the call is ctx's own process (its file is the run's ctx
	// binary), which the init runs as a tool worker given this order (the
	// idle warm one, or one started for it), never by an execve that
	// would leave the process to guess whom it runs for.
	Worker bool `json:"worker,omitempty"`
}

// InitReport is what the init tells the host: how the process of order
// ID ended (OpExit: its status, why when it never started, and what a
// tool worker reported of its call), that the unix gate is up, with its
// listener attached (OpUnixGate), or that the gate's connector runs
// (OpConnector).
type InitReport struct {
	Op     Op      `json:"op"`
	ID     uint64  `json:"id"`
	Status int     `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
	Tool   *Report `json:"tool,omitempty"`
}

// Argv0 is the order's program name, "" when it has none.
func (o Order) Argv0() string {
	if len(o.Argv) == 0 {
		return ""
	}
	return o.Argv[0]
}

// Send sends v as one datagram on fd with fds attached.
func Send(fd int, v any, fds []int) error {
	b, oob, err := encode(v, fds)
	if err != nil {
		return err
	}
	for {
		err = sendmsg(fd, b, oob, 0)
		if err != unix.EAGAIN || !awaitReady(fd, true) {
			return err
		}
	}
}

// encode makes v's datagram and the control message that attaches fds.
func encode(v any, fds []int) (b, oob []byte, err error) {
	ok := false
	if r, is := v.(Request); is {
		b, ok = r.appendJSON(make([]byte, 0, r.sizeHint())) // encode.go
	}
	if !ok {
		if b, err = json.Marshal(v); err != nil {
			return nil, nil, err
		}
	}
	if len(b) > MaxMessage {
		return nil, nil, fmt.Errorf("broker message of %d bytes (limit %d)", len(b), MaxMessage)
	}
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	return b, oob, nil
}

// sendmsg sends one datagram, again when a signal interrupted it.
func sendmsg(fd int, b, oob []byte, flags int) error {
	for {
		err := unix.Sendmsg(fd, b, oob, nil, flags)
		if err != unix.EINTR {
			return err
		}
	}
}

// ErrClosed is the end of a broker channel.
var ErrClosed = errors.New("broker channel closed")

// Recv receives one datagram from fd into v and returns the
// descriptors attached to it (at most max; more are closed). A truncated
// message or malformed JSON is an error, after closing what came with it.
//
// The message's length is read first, by a peek that takes nothing, and
// the buffer made to fit: one of the largest message's size (256 KiB),
// which the allocator zeroes, cost every receiver 64 page faults, the
// process of every tool call among them.
func Recv(fd int, v any, max int) ([]*os.File, error) {
	return recv(fd, v, max, 0)
}

// RecvQueued is Recv of a message already queued on fd, without waiting:
// unix.EAGAIN when none is, ErrClosed when none is and the sender is gone.
func RecvQueued(fd int, v any) error {
	_, err := recv(fd, v, 0, unix.MSG_DONTWAIT)
	return err
}

func recv(fd int, v any, max, wait int) ([]*os.File, error) {
	var n, oobn, flags int
	var err error
	var none [1]byte
	for {
		n, _, _, _, err = unix.Recvmsg(fd, none[:], nil, unix.MSG_PEEK|unix.MSG_TRUNC|wait)
		if err == unix.EAGAIN && wait == 0 && awaitReady(fd, false) {
			continue
		}
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	buf := make([]byte, min(n, MaxMessage)+1)
	oob := make([]byte, unix.CmsgSpace(8*4))
	for {
		n, oobn, flags, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC|wait)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var files []*os.File
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for i := range msgs {
			fds, err := unix.ParseUnixRights(&msgs[i])
			if err != nil {
				continue
			}
			for _, f := range fds {
				if len(files) < max {
					files = append(files, os.NewFile(uintptr(f), "passed"))
				} else {
					unix.Close(f)
				}
			}
		}
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	if n == 0 && oobn == 0 {
		return nil, ErrClosed
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || n > MaxMessage {
		closeAll()
		return nil, fmt.Errorf("broker message over %d bytes or with too many descriptors", MaxMessage)
	}
	if err := json.Unmarshal(buf[:n], v); err != nil {
		closeAll()
		return nil, fmt.Errorf("malformed broker message: %v", err)
	}
	return files, nil
}

// NewOrderChannel makes the host-init order channel: the host keeps the
// first end (pollable: RecvFile, SendFile), the init is handed the second
// (sandbox.Sandbox.SetBrokerChannel).
func NewOrderChannel() (host, init *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	// The host waits on its end through the netpoller (poll.go).
	return Pollable(fds[0], "broker-host"), os.NewFile(uintptr(fds[1]), "broker-init"), nil
}

// Listen binds the broker socket at path (mode 0666: inside the
// sandbox only the run's processes can reach it, whatever their uid).
func Listen(path string) (*Listener, error) {
	fd, err := brokerSocket(path, func(fd int, sa *unix.SockaddrUnix) error {
		if err := unix.Bind(fd, sa); err != nil {
			return err
		}
		// By the bound name: a long path's is its pinned directory's.
		if err := unix.Chmod(sa.Name, 0o666); err != nil {
			return &os.PathError{Op: "chmod", Path: path, Err: err}
		}
		return unix.Listen(fd, 64)
	})
	if err != nil {
		return nil, err
	}
	return &Listener{Pollable(fd, "broker-listen")}, nil
}

// Dial connects to the broker at path.
func Dial(path string) (int, error) {
	return brokerSocket(path, func(fd int, sa *unix.SockaddrUnix) error { return unix.Connect(fd, sa) })
}

// brokerSocket makes a SOCK_SEQPACKET socket and hands it, with path's
// address (SocketAddress), to use: bind or connect.
func brokerSocket(path string, use func(fd int, sa *unix.SockaddrUnix) error) (int, error) {
	name, done, err := fsops.SocketAddress(path)
	if err != nil {
		return -1, err
	}
	defer done()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := use(fd, &unix.SockaddrUnix{Name: name}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
