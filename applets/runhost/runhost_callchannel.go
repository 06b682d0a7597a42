package runhost

import (
	"os"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
)

// A call's host-operation channel: the only way a tool process asks the
// run host for the one thing it cannot do inside the sandbox (issue 30,
// finding 3). For a call of a tool with a host operation (hostOpTools)
// the host makes a socket pair and passes one end with the order; the
// init hands it to the tool worker with the order, where it is
// close-on-exec. No token exists that another process of the run could
// read from the tool's environment and use: the broker socket refuses
// host operations, and the channel's end lives in that one process (its
// /proc/PID/fd entry cannot be opened, pidfd_getfd is refused by
// seccomp). What a tool reports of its call does not come this way: it
// comes with the call's exit, in the init's report.

// hostOpTools are the tools whose calls get a channel: those the host
// does an operation for (hostOperation).
var hostOpTools = map[string]bool{"agent.update": true, "agent.create": true, "agent.start": true, "agent.stop": true}

// brokerCall is a call in flight with a channel: whether it has had its
// host operation.
type brokerCall struct {
	tool   string
	conn   *os.File
	opDone bool          // under the broker's mu
	done   chan struct{} // closed when the channel has ended
	b      *Broker
}

// openCallChannel makes the channel of a call of tool and starts serving
// the host's end; the other end goes with the order.
func (b *Broker) openCallChannel(tool string) (*brokerCall, *os.File, error) {
	host, tools, err := broker.NewOrderChannel()
	if err != nil {
		return nil, nil, err
	}
	c := &brokerCall{tool: tool, conn: host, done: make(chan struct{}), b: b}
	go c.serve()
	return c, tools, nil
}

// serve answers the tool's host operations until the channel ends.
func (c *brokerCall) serve() {
	defer close(c.done)
	defer c.conn.Close()
	for {
		var req broker.Request
		files, err := broker.RecvFile(c.conn, &req, 0)
		closeFiles(files)
		if err == broker.ErrClosed || err == unix.EBADF || err == unix.ECONNRESET {
			return
		}
		if err == nil && req.HostOp != nil {
			broker.SendFile(c.conn, c.b.hostOperation(c, req.HostOp), nil)
		}
	}
}

// end ends the channel once its call has ended: its tool process is
// gone, and a holder that outlived it (none should) is cut off (shutdown
// wakes a blocked receive; close alone would not).
func (c *brokerCall) end() {
	if rc, err := c.conn.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { broker.Cancel(int(fd)) })
	}
	<-c.done
}
