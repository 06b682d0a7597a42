package toolrun

import (
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
)

// AskHost asks the run host that ordered call c for its host operation,
// on the call's host-operation channel, and returns the host's reply; ok
// is false when the call has no such channel (it was not run on the
// host's order for a tool with a host operation).
func (c *ToolCall) AskHost(op broker.HostOp) (reply broker.Reply, ok bool, err error) {
	if c.Order == nil || c.Order.HostOps == nil {
		return reply, false, nil
	}
	fd := int(c.Order.HostOps.Fd())
	if err := broker.Send(fd, broker.Request{HostOp: &op}, nil); err != nil {
		return reply, true, err
	}
	_, err = broker.Recv(fd, &reply, 0)
	return reply, true, err
}

// ErrnoByName is the errno called name ("EINVAL"), 0 when unknown.
func ErrnoByName(name string) syscall.Errno {
	if name == "" {
		return 0
	}
	for e := syscall.Errno(1); e < 256; e++ {
		if unix.ErrnoName(e) == name {
			return e
		}
	}
	return 0
}
