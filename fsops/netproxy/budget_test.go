package netproxy

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// openRelay CONNECTs to host:443 and returns the open relay's client end.
func openRelay(t *testing.T, s *stage, host string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br := s.connect("CONNECT " + host + ":443 HTTP/1.1\r\n\r\n")
	if status, body := reply(t, br); status != "HTTP/1.1 200 Connection established" {
		t.Fatalf("%s: %q %q", host, status, body)
	}
	return c, br
}

// TestByteBudget: a relay that would pass net_bytes is cut at the budget,
// never past it, and the next connection is refused naming the budget.
func TestByteBudget(t *testing.T) {
	const budget = 256 << 10
	s := newStage(t, Config{Budget: Budget{Bytes: budget}}, "api.example.com")
	s.name("api.example.com", publicAddr)
	s.server(publicAddr, 443, func(c net.Conn) { io.Copy(io.Discard, c) })
	c, _ := openRelay(t, s, "api.example.com")
	chunk := make([]byte, 64<<10)
	sent := 0
	for sent < 4*budget {
		n, err := c.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	r := s.record()
	if r.Layer != LayerBudget || !strings.Contains(r.Reason, "net_bytes") || r.BytesUp > budget || r.BytesUp < budget/2 {
		t.Fatalf("record %+v after %d sent", r, sent)
	}
	if used, _ := s.proxy.Usage(); used > budget {
		t.Fatalf("used %d of %d", used, budget)
	}
	_, br := s.connect("CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
	status, body := reply(t, br)
	if !strings.HasPrefix(status, "HTTP/1.1 403") || !strings.Contains(body, "net_bytes budget of 262144 bytes spent") {
		t.Fatalf("after the budget: %q %q", status, body)
	}
	s.record()
}

// TestConnectionBudget: past net_connections the proxy refuses, naming
// the budget; refused requests do not count.
func TestConnectionBudget(t *testing.T) {
	s := newStage(t, Config{Budget: Budget{Connections: 2}}, "api.example.com")
	s.name("api.example.com", publicAddr)
	s.server(publicAddr, 443, echo)
	_, br := s.connect("CONNECT evil.example.com:443 HTTP/1.1\r\n\r\n")
	reply(t, br)
	s.record()
	for i := 0; i < 2; i++ {
		c, _ := openRelay(t, s, "api.example.com")
		c.Close()
		s.record()
	}
	_, br = s.connect("CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
	status, body := reply(t, br)
	if !strings.HasPrefix(status, "HTTP/1.1 403") || !strings.Contains(body, "net_connections budget of 2 connections spent") {
		t.Fatalf("third connection: %q %q", status, body)
	}
	if r := s.record(); r.Layer != LayerBudget {
		t.Fatalf("record %+v", r)
	}
}

// TestRevokeMidStream: taking the grant back closes the open relay within
// a second of Revalidate, records it as revoked, refuses the next
// connection, and leaves a relay whose grant still holds open.
func TestRevokeMidStream(t *testing.T) {
	s := newStage(t, Config{}, "api.example.com", "keep.example.com")
	s.name("api.example.com", publicAddr)
	s.name("keep.example.com", "203.0.113.11")
	s.server(publicAddr, 443, echo)
	s.server("203.0.113.11", 443, echo)
	c, br := openRelay(t, s, "api.example.com")
	keep, keepBr := openRelay(t, s, "keep.example.com")
	roundTrip(t, c, br, "before")
	if n := s.proxy.Revalidate(); n != 0 {
		t.Fatalf("unchanged grants closed %d relays", n)
	}
	s.setGrants("keep.example.com")
	start := time.Now()
	if n := s.proxy.Revalidate(); n != 1 {
		t.Fatalf("Revalidate closed %d relays", n)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := br.ReadByte(); err != io.EOF || time.Since(start) > time.Second {
		t.Fatalf("revoked relay: %v after %v", err, time.Since(start))
	}
	r := s.record()
	if r.Layer != LayerRevoked || !r.Relayed || r.BytesUp != 6 || !strings.Contains(r.Reason, "no rule allows api.example.com:443") {
		t.Fatalf("record %+v", r)
	}
	roundTrip(t, keep, keepBr, "still here")
	_, br = s.connect("CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
	if status, _ := reply(t, br); !strings.HasPrefix(status, "HTTP/1.1 403") {
		t.Fatalf("after revocation: %q", status)
	}
	s.record()
}

// TestRevokeAddressGrant: a relay to a private address a name reached
// because the address was granted closes when that grant goes, though
// the name's grant stays.
func TestRevokeAddressGrant(t *testing.T) {
	s := newStage(t, Config{}, "lan.example.com", "10.0.0.5")
	s.name("lan.example.com", "10.0.0.5")
	s.server("10.0.0.5", 443, echo)
	c, br := openRelay(t, s, "lan.example.com")
	s.setGrants("lan.example.com")
	// The client hears 200 before the proxy registers the relay: a
	// Revalidate in between sees no relay, and the relay's own decision
	// once registered closes it instead. Either way it must end, recorded
	// as revoked by the rule that would allow it.
	if n := s.proxy.Revalidate(); n > 1 {
		t.Fatalf("Revalidate closed %d", n)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("relay still open: %v", err)
	}
	if r := s.record(); r.Layer != LayerRevoked || r.Rule != "allow a_t network:10.0.0.5 connect" {
		t.Fatalf("record %+v", r)
	}
}

// TestCloseEndsRelays: Close (the run ended) closes open relays and
// refuses new connections; MaxOpen refuses past the bound.
func TestCloseEndsRelays(t *testing.T) {
	s := newStage(t, Config{MaxOpen: 1}, "api.example.com")
	s.name("api.example.com", publicAddr)
	s.server(publicAddr, 443, echo)
	c, br := openRelay(t, s, "api.example.com")
	extra, extraBr := s.connect("CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
	if _, err := extraBr.ReadByte(); err == nil {
		t.Fatalf("connection past MaxOpen: %v", err)
	}
	extra.Close()
	if r := s.record(); r.Layer != LayerBudget {
		t.Fatalf("past MaxOpen: %+v", r)
	}
	s.proxy.Close()
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("relay after Close: %v", err)
	}
	if r := s.record(); r.Layer != LayerClosed || r.Reason != ReasonRunEnded {
		t.Fatalf("record %+v", r)
	}
}

// TestRevokeBetweenDecisionAndRelay: a grant taken back (and Revalidate
// run) after the decision but before the relay is registered still
// closes the relay: it is decided again once registered.
func TestRevokeBetweenDecisionAndRelay(t *testing.T) {
	s := newStage(t, Config{}, "api.example.com")
	s.name("api.example.com", publicAddr)
	s.server(publicAddr, 443, echo)
	var once sync.Once
	s.afterDecide = func() {
		once.Do(func() {
			s.setGrants()
			s.proxy.Revalidate() // sees no relay yet
		})
	}
	c, br := s.connect("CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	reply(t, br)
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("relay open after revocation: %v", err)
	}
	if r := s.record(); r.Layer != LayerRevoked {
		t.Fatalf("record %+v", r)
	}
}
