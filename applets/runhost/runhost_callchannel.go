package runhost

import (
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"ctx/applets/toolrun"
	"ctx/fsops/broker"
	"ctx/policy"
)

// A call's channel: the only way a tool process speaks for its call
// (issue 30, finding 3). The host makes a socket pair per call and passes
// one end with the exec order; the init hands it to the tool process as
// broker.CallChannelFD, which the tool makes close-on-exec before anything
// else. No token exists that another process of the run could read from
// the tool's environment and use: the broker socket refuses reports and
// host operations, and the channel's end lives in that one process (its
// /proc/PID/fd entry cannot be opened, pidfd_getfd is refused by seccomp).

// brokerCall is a call in flight with a channel: what its tool reported,
// once, and whether it has had its host operation.
type brokerCall struct {
	tool   string
	conn   *os.File
	report *broker.Report // under the broker's mu
	opDone bool           // under the broker's mu
	done   chan struct{}  // closed when the channel has ended
	b      *Broker
}

// callChannelWait bounds how long the record of a call waits, after its
// exit, for its channel to end (every holder is gone by then: the tool
// exited, the init and the host closed theirs).
const callChannelWait = 2 * time.Second

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

// serve takes the tool's messages until the channel ends: the first
// report (later ones are dropped) and host operations, each answered.
func (c *brokerCall) serve() {
	defer close(c.done)
	defer c.conn.Close()
	for {
		var req broker.Request
		files, err := broker.Recv(int(c.conn.Fd()), &req, 0)
		closeFiles(files)
		if err == broker.ErrClosed || err == unix.EBADF || err == unix.ECONNRESET {
			return
		}
		switch {
		case err != nil:
			continue
		case req.Report != nil:
			rep := sanitizeReport(*req.Report)
			c.b.mu.Lock()
			if c.report == nil {
				c.report = &rep
			}
			c.b.mu.Unlock()
		case req.HostOp != nil:
			broker.Send(int(c.conn.Fd()), c.b.hostOperation(c, req.HostOp), nil)
		}
	}
}

// finish waits (bounded) for the channel to end and returns the report.
func (c *brokerCall) finish() *broker.Report {
	select {
	case <-c.done:
	case <-time.After(callChannelWait):
		// A holder outlived the call: stop reading (shutdown wakes a
		// blocked receive; close alone would not).
		if rc, err := c.conn.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { broker.Cancel(int(fd)) })
		}
		<-c.done
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return c.report
}

// Bounds of a reported field (the event line is bounded as a whole too).
const (
	maxReportErrno  = 32
	maxReportLayer  = 64
	maxReportDetail = 512
)

// sanitizeReport keeps of a tool's report what is valid: an errno name
// the kernel has, a layer of ctx's checks, and a detail of valid UTF-8 cut
// at a character boundary within maxReportDetail bytes. The escaping of
// control characters is the event encoder's and the printer's.
func sanitizeReport(rep broker.Report) broker.Report {
	var out broker.Report
	if len(rep.Errno) <= maxReportErrno && toolrun.ErrnoByName(rep.Errno) != 0 {
		out.Errno = rep.Errno
	}
	if len(rep.Layer) <= maxReportLayer && policy.KnownLayer(rep.Layer) {
		out.Layer = rep.Layer
	}
	out.Detail = boundUTF8(strings.ToValidUTF8(rep.Detail, "\uFFFD"), maxReportDetail)
	return out
}

// boundUTF8 cuts s to at most n bytes at a character boundary.
func boundUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
