package applets

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/policy"
)

// askHost sends one request without descriptors to the run host and
// returns its reply.
func askHost(req fsops.BrokerRequest) (fsops.BrokerReply, error) {
	var reply fsops.BrokerReply
	socket := fsops.BrokerSocket
	if _, err := os.Stat(policy.IdentityPath); err != nil {
		socket = os.Getenv("CTX_BROKER") // iso landlock: a host path
	}
	conn, err := fsops.DialBroker(socket)
	if err != nil {
		return reply, err
	}
	defer fsops.CloseFD(conn)
	if err := fsops.SendBrokerMessage(conn, req, nil); err != nil {
		return reply, err
	}
	_, err = fsops.RecvBrokerMessage(conn, &reply, 0)
	return reply, err
}

// errnoByName is the errno called name ("EINVAL"), 0 when unknown.
func errnoByName(name string) syscall.Errno {
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
