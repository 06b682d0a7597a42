package sandbox

import (
	"syscall"
	"time"

	"ctx/fsops/broker"
	"ctx/fsops/toolworker"
)

// The init's side of the worker's socket after an order: it is read for
// the worker's life (toolworker.Watch); the end of a call after which the
// worker stays is acted on by the init's loop, on its locked thread
// (callEnded), and a report before an exit waits until the exit is reaped
// (finalReport).

// endedQueue bounds the ends of calls waiting for the init's loop.
const endedQueue = 16

// finalWait bounds how long a reaped worker's report is waited for: its
// socket has no other writer, so its end is already there.
const finalWait = time.Second

// workerEnded is the end of a call after which worker w stays.
type workerEnded struct {
	w   *toolWorker
	end broker.WorkerMessage
}

// watch starts reading w's socket; false when it cannot (the call is then
// reported at the worker's exit, without its tool's report). A message
// that is not a worker's ends it: it runs no more calls, and its exit
// reports the one it has.
func (b *initBroker) watch(w *toolWorker) bool {
	final, ok := toolworker.Watch(w.conn, func(m broker.WorkerMessage) { b.ended <- workerEnded{w, m} },
		func() { syscall.Kill(-w.pid, syscall.SIGKILL) })
	w.final = final
	return ok
}

// finalReport is what w's tool reported before it exited, nil when it
// reported nothing.
func (w *toolWorker) finalReport() *broker.Report {
	if !w.watched {
		return nil
	}
	select {
	case m := <-w.final:
		return m.HostPart()
	case <-time.After(finalWait):
		return nil
	}
}

// callEnded reports the end of a call whose worker stays, and puts the
// worker back among the idle ones: unless its call was cancelled (its
// process group is being killed), or enough wait already. An end that
// comes after the worker's exit was reaped was reported then.
func (b *initBroker) callEnded(e workerEnded) {
	w := e.w
	id, ok := b.byPid[w.pid]
	if !ok || b.working[w.pid] != w {
		return
	}
	delete(b.byPid, w.pid)
	delete(b.pgid, id)
	delete(b.working, w.pid)
	b.report(broker.InitReport{Op: broker.OpExit, ID: id, Status: e.end.Status, Tool: e.end.HostPart()})
	if w.cancelled || len(b.idle) >= maxIdle {
		b.retire(w)
		return
	}
	b.idle = append(b.idle, w)
}

// maxIdle bounds the workers kept waiting.
const maxIdle = 2

// endings is the channel of calls' ends, nil (never ready) without a
// broker.
func (b *initBroker) endings() <-chan workerEnded {
	if b == nil {
		return nil
	}
	return b.ended
}
