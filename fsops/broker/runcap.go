package broker

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The run capability is one mechanism with two ends, both here: the run
// host makes the pair and serves the host end (NewRunCapability, Serve,
// Acknowledge); a process of the run finds its end in the environment
// (RunFDFromEnv) and sends on it (SendToRun). What travels on it (the
// message format, who may send what) is authority's: this file only moves
// bytes and credentials.

// RunFDEnv names the environment variable that gives a process of a run
// the descriptor number of its end of the run capability.
const RunFDEnv = "CTX_RUN_FD"

// RunCapability is a run's capability: a SOCK_SEQPACKET socket pair. The
// run host keeps one end; the sandbox inherits the other as sandbox.RunFD.
// Only processes of that run hold it, so whatever arrives is bound to the run
// without any name to forge, and the kernel attaches each sender's pid
// (SO_PASSCRED), which the host checks before it believes a message.
type RunCapability struct {
	host  *os.File
	Child *os.File // pass to the sandbox, then close with CloseChild
}

// NewRunCapability makes the pair.
func NewRunCapability() (*RunCapability, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, err
	}
	return &RunCapability{host: os.NewFile(uintptr(fds[0]), "run-host"), Child: os.NewFile(uintptr(fds[1]), "run-child")}, nil
}

// CloseChild closes the host's copy of the child end, once the sandbox has
// inherited it, so that Serve ends when the last process of the run does.
// A run without a capability (nil) has nothing to close.
func (c *RunCapability) CloseChild() {
	if c != nil {
		c.Child.Close()
	}
}

// Serve receives messages until every holder of the child end is gone,
// calling handle with the sender's pid (as the host sees it), the message,
// and the acknowledgement descriptor the sender passed (or nil). The
// sender waits on that descriptor, so it is still alive, and its pid still
// its own, while handle checks who it is; Serve closes it after handle.
// Messages without credentials are dropped.
func (c *RunCapability) Serve(maxMessage int, handle func(pid int, msg []byte, ack *os.File)) {
	fd := int(c.host.Fd())
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred)+unix.CmsgSpace(4*4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 && oobn == 0 {
			return
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		pid := 0
		var ack *os.File
		for i := range msgs {
			if cred, err := unix.ParseUnixCredentials(&msgs[i]); err == nil {
				pid = int(cred.Pid)
			}
			if fds, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				for _, f := range fds {
					if ack == nil {
						ack = os.NewFile(uintptr(f), "ack")
					} else {
						unix.Close(f) // one acknowledgement descriptor per message
					}
				}
			}
		}
		if pid > 0 && flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) == 0 {
			handle(pid, append([]byte(nil), buf[:n]...), ack)
		}
		if ack != nil {
			ack.Close()
		}
	}
}

// Acknowledge tells a sender waiting on ack whether its message was taken.
func Acknowledge(ack *os.File, ok bool) {
	if ack == nil {
		return
	}
	b := []byte{'0'}
	if ok {
		b[0] = '1'
	}
	ack.Write(b)
}

// Close closes the host end (nothing for nil).
func (c *RunCapability) Close() {
	if c != nil {
		c.host.Close()
	}
}

// RunFDFromEnv returns the descriptor CTX_RUN_FD names when it is a
// canonical number above stderr and an open socket of this process.
func RunFDFromEnv(getenv func(string) string) (int, bool) {
	v := getenv(RunFDEnv)
	n, err := strconv.Atoi(v)
	if err != nil || n < 3 || n > 1<<16 || strconv.Itoa(n) != v {
		return 0, false
	}
	var st unix.Stat_t
	if unix.Fstat(n, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return 0, false
	}
	return n, true
}

// SendToRun sends msg on the run capability fd with a fresh
// acknowledgement descriptor and waits, at most timeout, until the host
// has taken it: the host checks the sender through its pid, which is only
// meaningful while the sender is alive. It reports whether the message was
// sent (a host that answers late still got it).
func SendToRun(fd int, msg []byte, timeout time.Duration) bool {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(pair[0])
	err = unix.Sendmsg(fd, msg, unix.UnixRights(pair[1]), nil, 0)
	unix.Close(pair[1])
	if err != nil {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(pair[0]), Events: unix.POLLIN}}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1); err != unix.EINTR {
			break
		}
	}
	var b [1]byte
	unix.Read(pair[0], b[:])
	return true
}
