package runhost

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/fsops/proc"
)

// Who the broker serves, and how much of it each may hold (DESIGN §16
// rule 12). A connection is either from inside the run (its peer, by
// SO_PEERCRED, descends from the run's init: in every mode, never
// assumed) or from outside, where only the person who started the run
// (their uid or root) holding the run's secret is served: join, ctx run,
// ctxmcp serve --agent. Neither can starve the other: a request must
// arrive within handshakeTimeout of the connection; each side has its own
// bounded set of connections waiting to speak, the oldest dropped for a
// new one; and of the maxBrokerCalls calls in flight, personCalls are the
// person's alone, so a run's own processes never take them all.

const (
	// maxBrokerCalls bounds the calls one run may have in flight at once.
	maxBrokerCalls = 64
	// personCalls of them are kept for the person's own calls.
	personCalls = 8
	// handshakeTimeout bounds the wait for a caller's request after it
	// connects: every client of ctx sends it at once.
	handshakeTimeout = 2 * time.Second
	// maxPendingPerSide bounds the connections of one side (inside,
	// outside) that have not spoken yet.
	maxPendingPerSide = 64
)

// brokerPeer is who connected, as the kernel says and the run host
// found.
type brokerPeer struct {
	pid, uid int
	inside   bool // a process of the run (descends from its init)
}

// side indexes the gate's per-side state.
func (p brokerPeer) side() int {
	if p.inside {
		return 0
	}
	return 1
}

// brokerGate holds the connections still to speak, per side, and the call
// slots, per side.
type brokerGate struct {
	mu      sync.Mutex
	pending [2][]int         // conns awaiting their request, oldest first
	slots   [2]chan struct{} // calls in flight: the run's, the person's
}

func newBrokerGate() brokerGate {
	return brokerGate{slots: [2]chan struct{}{
		make(chan struct{}, maxBrokerCalls-personCalls),
		make(chan struct{}, personCalls),
	}}
}

// wait registers conn as waiting to speak; over maxPendingPerSide the
// side's oldest is woken with end of file (its handler closes it).
func (g *brokerGate) wait(p brokerPeer, conn int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.pending[p.side()]
	if len(q) >= maxPendingPerSide {
		broker.Shutdown(q[0])
		q = q[1:]
	}
	g.pending[p.side()] = append(q, conn)
}

// spoke removes conn from the waiting, before its handler closes it (so a
// descriptor number in the set is always still this connection's).
func (g *brokerGate) spoke(p brokerPeer, conn int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.pending[p.side()]
	for i, c := range q {
		if c == conn {
			g.pending[p.side()] = append(q[:i:i], q[i+1:]...)
			return
		}
	}
}

// dropPending wakes every connection still to speak (the run is ending).
func (g *brokerGate) dropPending() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range g.pending {
		for _, c := range q {
			broker.Shutdown(c)
		}
	}
}

// take claims a call slot of p's side; release gives it back. False when
// the side's slots are all in use.
func (g *brokerGate) take(p brokerPeer) bool {
	select {
	case g.slots[p.side()] <- struct{}{}:
		return true
	default:
		return false
	}
}

func (g *brokerGate) release(p brokerPeer) { <-g.slots[p.side()] }

// serve accepts connections until the listener is closed, each handled
// in a goroutine of its own from the moment it is accepted.
func (b *Broker) serve() {
	for {
		conn, err := b.listen.Accept()
		if err == unix.EMFILE || err == unix.ENFILE || err == unix.ENOMEM || err == unix.ENOBUFS {
			time.Sleep(50 * time.Millisecond) // out of descriptors: back off, do not stop
			continue
		}
		if err != nil {
			return
		}
		p := brokerPeer{uid: -1}
		if pid, uid, err := broker.Peer(conn); err == nil {
			p.pid, p.uid = pid, uid
			init := int(b.initPid.Load())
			p.inside = broker.PeerStill(conn, pid, func(pid int) bool { return proc.Descends(pid, init) })
		}
		b.enter(conn, p)
	}
}

// enter serves conn from p in a goroutine of its own, waiting to speak
// meanwhile (the unix gate of an iso landlock run hands its connections
// here too, with the pid of the process that asked): a handler that has
// served its connection and waits for another, else a new one.
func (b *Broker) enter(conn int, p brokerPeer) {
	b.gate.wait(p, conn)
	b.handlers.Add(1)
	select {
	case b.idle <- brokerConn{conn, p}:
	default:
		go b.handleFrom(brokerConn{conn, p})
	}
}

// brokerConn is a connection to serve and its peer.
type brokerConn struct {
	conn int
	p    brokerPeer
}

// handleFrom serves c and then each connection enter hands it, until the
// run ends: a goroutine per call grew its stack anew down a decision's
// deep path every time, where one that stays keeps what it grew.
func (b *Broker) handleFrom(c brokerConn) {
	for {
		b.handle(c.conn, c.p)
		b.handlers.Done()
		select {
		case c = <-b.idle:
		case <-b.readDone:
			return
		}
	}
}

// admitted says whether p, which sent req, is served: a process of the
// run, or the person who started it (their uid, or root) presenting the
// run's secret. It answers a refusal itself.
func (b *Broker) admitted(conn int, p brokerPeer, req *broker.Request) bool {
	if p.inside {
		return true
	}
	if (p.uid == b.R.callerUID || p.uid == 0) && fsops.SecretsEqual(req.Secret, b.R.secret) {
		return true
	}
	// Not recorded: a process that cannot prove anything must not spend
	// the run's log budget.
	broker.Send(conn, broker.Reply{Exit: cli.Denied,
		Error: "the broker serves only the processes of its own run, and the person who started it with the run's secret"}, nil)
	return false
}
