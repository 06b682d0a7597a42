package toolworker

import (
	"os"

	"ctx/fsops/broker"
)

// Watch reads, in the init, the socket of a worker that was given an
// order (conn, the init's end), for the worker's life. A worker speaks on
// it once per call: its tool's report before it exits, or, when it stays
// for another call (again.go), the end of its call, which goes to ended.
// The report before an exit (nil for none, or for a worker gone without
// one) comes on the channel returned, once. A message that is not a
// worker's calls bad and ends the watch, as an exit would. The socket is
// read on a descriptor of the watch's own (closed when the worker's end
// has closed), so that the init may close conn, and its number be reused,
// while the read waits. ok is false when no watch could be started.
func Watch(conn *os.File, ended func(broker.WorkerMessage), bad func()) (final <-chan *broker.WorkerMessage, ok bool) {
	// Waited on through the netpoller (fsops/broker/poll.go).
	f, err := broker.PollableDup(int(conn.Fd()), "worker-watch")
	if err != nil {
		return nil, false
	}
	last := make(chan *broker.WorkerMessage, 1)
	go func() {
		defer f.Close()
		for {
			var m broker.WorkerMessage
			_, err := broker.RecvFile(f, &m, 0)
			switch {
			case err == nil && m.Ended:
				ended(m)
				continue
			case err == nil:
				last <- &m
			case err == broker.ErrClosed:
				last <- nil
			default:
				bad()
				last <- nil
			}
			return
		}
	}()
	return last, true
}
