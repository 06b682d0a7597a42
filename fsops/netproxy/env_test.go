package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ctx/policy"
)

// The tests run the proxy as a run host would, with the real policy
// deciding, and keep every byte on the machine: the stand-in resolver
// answers names with documentation addresses (203.0.113.0/24, which the
// proxy treats as public) or whatever a test makes it say, and the
// stand-in dialler connects such an address to a local server, recording
// every address it was asked for. Loopback addresses are dialled for real.

// stage is one test's proxy and its world.
type stage struct {
	t       testing.TB
	grants  atomic.Pointer[policy.NetworkGrants]
	proxy   *Proxy
	addr    string // the proxy's listening address
	names   map[string][]netip.Addr
	backing map[netip.AddrPort]string // stand-in address -> real local address
	mu      sync.Mutex
	dialled []netip.AddrPort
	lookups []string
	records chan Record
	// afterDecide, when set, runs after each decision (a policy change
	// landing between a decision and what follows it).
	afterDecide func()
}

const publicAddr = "203.0.113.10"

func newStage(t testing.TB, cfg Config, rules ...string) *stage {
	t.Helper()
	s := &stage{t: t, names: map[string][]netip.Addr{}, backing: map[netip.AddrPort]string{}, records: make(chan Record, 64)}
	s.setGrants(rules...)
	cfg.Decide = s.decide
	cfg.Resolver = s
	cfg.Dial = s.dial
	cfg.Report = func(r Record) { s.records <- r }
	s.proxy = New(cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	go s.proxy.Serve(l)
	t.Cleanup(func() { l.Close(); s.proxy.Close() })
	return s
}

// setGrants replaces the policy: allow a_t network:RULE connect per rule.
func (s *stage) setGrants(rules ...string) {
	var b strings.Builder
	for _, r := range rules {
		b.WriteString("allow a_t network:" + r + " connect\n")
	}
	p, err := policy.ParsePolicy([]byte(b.String()))
	if err != nil {
		s.t.Fatal(err)
	}
	s.grants.Store(policy.NetworkGrantsOf(p, "a_t"))
}

func (s *stage) decide(host string, port int) Decision {
	d := s.grants.Load().Decide(host, port)
	if s.afterDecide != nil {
		s.afterDecide()
	}
	return Decision{Allowed: d.Allowed, Rule: d.Rule, Fix: d.Fix, Layer: string(d.Layer), Reason: d.Reason, Local: d.Local}
}

func (s *stage) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups = append(s.lookups, host)
	if !strings.HasSuffix(host, ".") {
		return nil, fmt.Errorf("%s asked without its final dot", host)
	}
	addrs, ok := s.names[strings.TrimSuffix(host, ".")]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

func (s *stage) dial(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
	s.mu.Lock()
	s.dialled = append(s.dialled, a)
	real, ok := s.backing[a]
	s.mu.Unlock()
	if !ok && a.Addr().IsLoopback() {
		real, ok = a.String(), true
	}
	if !ok {
		return nil, errors.New("unreachable in this test")
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", real)
}

// name makes host resolve to addrs.
func (s *stage) name(host string, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[host] = nil
	for _, a := range addrs {
		s.names[host] = append(s.names[host], netip.MustParseAddr(a))
	}
}

// server starts a local server reached as stand-in addr:port.
func (s *stage) server(addr string, port int, serve func(net.Conn)) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	s.mu.Lock()
	s.backing[netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(port))] = l.Addr().String()
	s.mu.Unlock()
}

func echo(c net.Conn) { io.Copy(c, c) }

func (s *stage) dialledAddrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.AddrPort(nil), s.dialled...)
}

// record waits for the next connection record.
func (s *stage) record() Record {
	s.t.Helper()
	select {
	case r := <-s.records:
		return r
	case <-time.After(5 * time.Second):
		s.t.Fatal("no record")
	}
	return Record{}
}

// connect opens a client connection to the proxy and sends raw.
func (s *stage) connect(raw string) (net.Conn, *bufio.Reader) {
	s.t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		s.t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// reply reads an HTTP reply head and body (Content-Length or to EOF).
func reply(t testing.TB, br *bufio.Reader) (status string, body string) {
	t.Helper()
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	length := -1
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reply head: %v", err)
		}
		if l == "\r\n" {
			break
		}
		fmt.Sscanf(l, "Content-Length: %d", &length)
	}
	if length >= 0 {
		b := make([]byte, length)
		io.ReadFull(br, b)
		return strings.TrimSpace(status), string(b)
	}
	return strings.TrimSpace(status), ""
}

// roundTrip writes msg on an open relay and reads it back from the echo.
func roundTrip(t testing.TB, c net.Conn, br *bufio.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
		t.Fatalf("echo %q, %v", got, err)
	}
}
