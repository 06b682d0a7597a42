package toolrun

import (
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops/broker"
)

// AskCallHost sends req on this process's call channel and returns the
// host's reply: a host operation, asked for the call this process runs.
func AskCallHost(req broker.Request) (broker.Reply, error) {
	var reply broker.Reply
	if err := broker.Send(CallChannel, req, nil); err != nil {
		return reply, err
	}
	_, err := broker.Recv(CallChannel, &reply, 0)
	return reply, err
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
