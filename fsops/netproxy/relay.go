package netproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// relay is one open connection between a client and its destination.
type relay struct {
	host     string
	port     int
	addr     netip.AddrPort
	client   net.Conn
	upstream net.Conn
	up, down atomic.Int64

	once   sync.Once
	mu     sync.Mutex
	layer  string // why it was stopped; "" while it runs on its own
	reason string
	rule   string
}

// stop closes both ends at once, for a reason the record keeps. The first
// reason wins.
func (r *relay) stop(layer, reason, rule string) {
	r.mu.Lock()
	if r.layer == "" {
		r.layer, r.reason, r.rule = layer, reason, rule
	}
	r.mu.Unlock()
	r.once.Do(func() {
		r.client.Close()
		r.upstream.Close()
	})
}

// chunkMax is the most a direction takes from the byte budget at once.
const chunkMax = 4 << 20

// errBudget ends a direction whose share of net_bytes is spent.
var errBudget = errors.New("net_bytes budget spent")

// reserve takes up to chunkMax bytes from the byte budget for one
// direction; 0 when it is spent. With a budget, a chunk is at most an
// eighth of what is left (at least 4 KiB), so directions that hold a
// reservation while idle keep little of it from the others.
func (p *Proxy) reserve() int64 {
	for {
		left := p.bytesLeft.Load()
		if left < 0 {
			return chunkMax
		}
		if left == 0 || p.bytesSpent.Load() {
			// Spent for good: what other relays hold and give back
			// later is not handed out again, so "spent" stays true.
			p.bytesSpent.Store(true)
			return 0
		}
		n := min(left, max(left/8, 4096), chunkMax)
		if p.bytesLeft.CompareAndSwap(left, left-n) {
			return n
		}
	}
}

func (p *Proxy) release(n int64) {
	if n > 0 && p.cfg.Budget.Bytes > 0 {
		p.bytesLeft.Add(n)
	}
}

// pump copies src to dst in budgeted chunks, counting into n as each
// write completes (copy.go says how). It returns nil at EOF.
func (p *Proxy) pump(dst io.Writer, src io.Reader, n *atomic.Int64) error {
	r := newReader(src)
	defer r.release()
	count := func(w int64) {
		n.Add(w)
		p.relayed.Add(w)
	}
	for {
		chunk := p.reserve()
		if chunk == 0 {
			return errBudget
		}
		w, eof, err := copyChunk(dst, r, chunk, count)
		p.release(chunk - w)
		if err != nil {
			return err
		}
		if eof {
			return nil
		}
	}
}

// relayConn relays client and upstream both ways until both ends are done
// or the relay is stopped, then fills the record. early holds client
// bytes read ahead of the relay (with its handshake) and goes first.
func (p *Proxy) relayConn(client, upstream net.Conn, early []byte, host string, port int, rec *Record) {
	r := &relay{host: host, port: port, addr: rec.Addr, client: client, upstream: upstream}
	if !p.register(r) {
		r.stop(LayerClosed, ReasonRunEnded, "")
	} else if ok, d := p.stillAllowed(host, port, rec.Addr.Addr()); !ok {
		// A Revalidate between the decision and the registration did
		// not see this relay: decide once more now that it would.
		r.stop(LayerRevoked, "grant revoked: "+d.Reason, d.Rule)
	}
	rec.Relayed = true
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		err := p.writeEarly(upstream, early, &r.up)
		if err == nil {
			err = p.pump(upstream, client, &r.up)
		}
		p.endDirection(r, upstream, err)
	}()
	go func() {
		defer wg.Done()
		p.endDirection(r, client, p.pump(client, upstream, &r.down))
	}()
	wg.Wait()
	r.stop("", "", "")
	p.unregister(r)
	rec.BytesUp, rec.BytesDown = r.up.Load(), r.down.Load()
	r.mu.Lock()
	if r.layer != "" {
		rec.Layer, rec.Reason = r.layer, r.reason
		if r.rule != "" {
			rec.Rule = r.rule
		}
	}
	r.mu.Unlock()
}

// writeEarly sends the bytes read ahead of the relay, within the budget.
func (p *Proxy) writeEarly(dst io.Writer, early []byte, n *atomic.Int64) error {
	for len(early) > 0 {
		chunk := p.reserve()
		if chunk == 0 {
			return errBudget
		}
		part := early[:min(int64(len(early)), chunk)]
		w, err := dst.Write(part)
		p.release(chunk - int64(w))
		n.Add(int64(w))
		p.relayed.Add(int64(w))
		if err != nil {
			return err
		}
		early = early[len(part):]
	}
	return nil
}

// endDirection finishes one direction: at EOF the destination's write
// side is shut (the other direction goes on, as TCP half-close means);
// on an error, or where no half-close exists, the whole relay stops.
func (p *Proxy) endDirection(r *relay, dst net.Conn, err error) {
	if errors.Is(err, errBudget) {
		r.stop(LayerBudget, fmt.Sprintf("net_bytes budget of %d bytes spent", p.cfg.Budget.Bytes), "")
		return
	}
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	r.stop("", "", "")
}

func (p *Proxy) register(r *relay) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.relays[r] = struct{}{}
	return true
}

func (p *Proxy) unregister(r *relay) {
	p.mu.Lock()
	delete(p.relays, r)
	p.mu.Unlock()
}
