package netproxy

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Decision is the run host's answer for one destination; its fields mean
// what policy.NetworkDecision's do.
type Decision struct {
	Allowed bool
	Rule    string // the rule that allows it, or the one that would
	Fix     string // the command that grants it, when known
	Layer   string // the refusing layer; "agent-policy" when empty
	Reason  string
	// Local: the allowing grant names its target itself, so a loopback or
	// private address is not refused for it.
	Local bool
}

// DecideFunc decides a connection to host:port. host is lower case, has no
// final dot, and is a DNS name, "localhost", or an IP address (IPv6
// without brackets).
type DecideFunc func(host string, port int) Decision

// Resolver resolves a name on the host; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Budget is a run's network budget; 0 means unlimited.
type Budget struct {
	Bytes       int64 // net_bytes: bytes relayed, both ways, all connections
	Connections int64 // net_connections: connections let through
}

// Layers a Record names besides the policy's own.
const (
	LayerRequest = "request" // malformed, or not a proxy protocol
	LayerTimeout = "timeout" // the client did not finish its request in time
	LayerResolve = "resolve" // the name does not resolve
	LayerAddress = "address" // every address of the name is one the proxy refuses
	LayerBudget  = "budget"  // net_bytes or net_connections spent, or too many open
	LayerDial    = "dial"    // the destination did not accept the connection
	LayerRevoked = "revoked" // the grant was taken back while the relay was open
	LayerClosed  = "closed"  // the proxy was closed (the run ended)
)

// ReasonRunEnded is the reason of a relay Close cut (layer closed): a
// connection still open when the run ended, a keep-alive one the program
// left open included. It was made and relayed until then.
const ReasonRunEnded = "closed at the run's end"

// Record is one connection's account, reported when it ends.
type Record struct {
	Start time.Time
	Via   string // "http-connect", "http", "socks5", "forward"
	Host  string
	Port  int
	Addr  netip.AddrPort // the address dialled; zero when none was
	// Relayed is true when the connection reached its destination.
	Relayed bool
	// Layer is the refusing layer, or what ended a relay early (budget,
	// revoked, closed); empty for a relay that ended by itself.
	Layer     string
	Rule      string // the allowing rule, or the one that would allow it
	Reason    string
	BytesUp   int64 // client to destination
	BytesDown int64 // destination to client
	Duration  time.Duration
}

// Config sets up a Proxy. Decide and Resolver are required.
type Config struct {
	Decide   DecideFunc
	Resolver Resolver
	// Dial connects to the checked address; nil dials TCP.
	Dial   func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	Report func(Record) // nil: records are dropped
	Budget Budget
	// HeaderTimeout bounds the whole handshake (a slow client's request
	// line and headers, a SOCKS greeting); default 10 s.
	HeaderTimeout time.Duration
	// MaxHeaderBytes bounds an HTTP request head; default 16 KiB.
	MaxHeaderBytes int
	DialTimeout    time.Duration // default 10 s, resolution included
	MaxOpen        int           // connections open at once; default 512
}

// Proxy serves the connections of one run.
type Proxy struct {
	cfg       Config
	bytesLeft atomic.Int64 // -1: unlimited
	conns     atomic.Int64 // connections let through
	open      atomic.Int64
	relayed   atomic.Int64 // bytes relayed, both ways
	// bytesSpent: a relay found net_bytes spent; no more bytes are
	// handed out, even those other relays give back.
	bytesSpent atomic.Bool
	mu         sync.Mutex
	relays     map[*relay]struct{}
	closed     bool
}

// New makes a Proxy.
func New(cfg Config) *Proxy {
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 10 * time.Second
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 16 << 10
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.MaxOpen <= 0 {
		cfg.MaxOpen = 512
	}
	if cfg.Dial == nil {
		cfg.Dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr.String())
		}
	}
	p := &Proxy{cfg: cfg, relays: map[*relay]struct{}{}}
	p.bytesLeft.Store(-1)
	if cfg.Budget.Bytes > 0 {
		p.bytesLeft.Store(cfg.Budget.Bytes)
	}
	return p
}

// Usage returns the bytes relayed so far (counted as each write of a
// relay completes) and the connections let through.
func (p *Proxy) Usage() (bytes, connections int64) {
	return p.relayed.Load(), p.conns.Load()
}

// Serve accepts connections on l and serves each with ServeConn until l
// is closed.
func (p *Proxy) Serve(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go p.ServeConn(c)
	}
}

// ServeConn serves one client connection speaking HTTP proxy or SOCKS5,
// told apart by its first byte, and closes it. It returns when the
// connection is done.
func (p *Proxy) ServeConn(c net.Conn) {
	rec := Record{Start: time.Now(), Via: "unknown"}
	defer c.Close()
	if !p.enter(c, &rec) {
		return
	}
	defer p.open.Add(-1)
	c.SetDeadline(rec.Start.Add(p.cfg.HeaderTimeout))
	br := bufio.NewReaderSize(c, 4096)
	first, err := br.Peek(1)
	switch {
	case err != nil:
		rec.Layer, rec.Reason = handshakeLayer(err), "no request: "+err.Error()
		p.report(&rec)
	case first[0] == socksVersion:
		rec.Via = "socks5"
		p.serveSOCKS(c, br, &rec)
	case 'A' <= first[0] && first[0] <= 'Z':
		rec.Via = "http"
		p.serveHTTP(c, br, &rec)
	default:
		rec.Layer, rec.Reason = LayerRequest, "neither an HTTP proxy request nor SOCKS5"
		p.report(&rec)
	}
}

// enter counts an open connection, refusing one past MaxOpen or after
// Close.
func (p *Proxy) enter(c net.Conn, rec *Record) bool {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		rec.Layer, rec.Reason = LayerClosed, "the run has ended"
		p.report(rec)
		return false
	}
	if p.open.Add(1) > int64(p.cfg.MaxOpen) {
		p.open.Add(-1)
		rec.Layer, rec.Reason = LayerBudget, "too many connections open at once"
		p.report(rec)
		return false
	}
	return true
}

// handshakeLayer names what cut a handshake short: the deadline, or the
// client.
func handshakeLayer(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return LayerTimeout
	}
	return LayerRequest
}

func (p *Proxy) report(rec *Record) {
	rec.Duration = time.Since(rec.Start)
	if p.cfg.Report != nil {
		p.cfg.Report(*rec)
	}
}

// Revalidate decides every open relay again and closes those whose grant
// no longer holds, returning how many it closed. The run host calls it
// when the agent's policy changes.
func (p *Proxy) Revalidate() int {
	p.mu.Lock()
	open := make([]*relay, 0, len(p.relays))
	for r := range p.relays {
		open = append(open, r)
	}
	p.mu.Unlock()
	n := 0
	for _, r := range open {
		if ok, d := p.stillAllowed(r.host, r.port, r.addr.Addr()); !ok {
			r.stop(LayerRevoked, "grant revoked: "+d.Reason, d.Rule)
			n++
		}
	}
	return n
}

// Close closes every open relay (layer closed, ReasonRunEnded) and
// refuses new connections. The run host calls it when the run ends.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	open := make([]*relay, 0, len(p.relays))
	for r := range p.relays {
		open = append(open, r)
	}
	p.mu.Unlock()
	for _, r := range open {
		r.stop(LayerClosed, ReasonRunEnded, "")
	}
}
