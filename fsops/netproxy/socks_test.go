package netproxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"testing"
)

// socksDomainRequest is a greeting offering no-auth and a CONNECT by name.
func socksDomainRequest(name string, port int) []byte {
	b := []byte{5, 1, 0, 5, 1, 0, 3, byte(len(name))}
	b = append(b, name...)
	return binary.BigEndian.AppendUint16(b, uint16(port))
}

func socksAddrRequest(a netip.Addr, port int) []byte {
	b := []byte{5, 1, 0, 5, 1, 0, 1}
	if a.Is6() {
		b[6] = 4
	}
	b = append(b, a.AsSlice()...)
	return binary.BigEndian.AppendUint16(b, uint16(port))
}

// socksReply reads the method selection and the reply, returning the
// reply code.
func socksReply(t *testing.T, br *bufio.Reader) byte {
	t.Helper()
	var sel [2]byte
	if _, err := io.ReadFull(br, sel[:]); err != nil || sel != [2]byte{5, 0} {
		t.Fatalf("method selection %v %v", sel, err)
	}
	var rep [10]byte
	if _, err := io.ReadFull(br, rep[:]); err != nil || rep[0] != 5 {
		t.Fatalf("reply %v %v", rep, err)
	}
	return rep[1]
}

// TestSOCKSByName: a granted name through SOCKS5 is relayed; an ungranted
// one, an address, a name with a NUL, and a name resolving to loopback
// are refused with 0x02 (not allowed by ruleset).
func TestSOCKSByName(t *testing.T) {
	s := newStage(t, Config{}, "api.example.com", "*.example.org")
	s.name("api.example.com", publicAddr)
	s.name("lo.example.org", "127.0.0.1")
	s.server(publicAddr, 443, echo)
	c, br := s.connect(string(socksDomainRequest("api.example.com", 443)) + "early")
	if code := socksReply(t, br); code != 0 {
		t.Fatalf("reply %#x", code)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "early" {
		t.Fatalf("early bytes %q %v", got, err)
	}
	roundTrip(t, c, br, "hi")
	c.Close()
	if r := s.record(); r.Via != "socks5" || !r.Relayed || r.Host != "api.example.com" || r.BytesUp != 7 {
		t.Fatalf("record %+v", r)
	}
	refused := []struct {
		req   []byte
		layer string
	}{
		{socksDomainRequest("evil.example.com", 443), "agent-policy"},
		{socksAddrRequest(netip.MustParseAddr(publicAddr), 443), "agent-policy"},
		{socksAddrRequest(netip.MustParseAddr("::1"), 22), "agent-policy"},
		{socksDomainRequest("api.example.com\x00.evil.example.com", 443), "request"},
		{socksDomainRequest("lo.example.org", 443), "address"},
	}
	for _, c := range refused {
		_, br := s.connect(string(c.req))
		if code := socksReply(t, br); code != socksNotAllowed {
			t.Errorf("%q: reply %#x", c.req, code)
		}
		if r := s.record(); r.Layer != c.layer || r.Relayed {
			t.Errorf("%q: record %+v", c.req, r)
		}
	}
	if d := s.dialledAddrs(); len(d) != 1 {
		t.Fatalf("dialled %v", d)
	}
}

// TestSOCKSByGrantedAddress: an address is reached by SOCKS only when the
// address itself is granted.
func TestSOCKSByGrantedAddress(t *testing.T) {
	s := newStage(t, Config{}, publicAddr+":443")
	s.server(publicAddr, 443, echo)
	c, br := s.connect(string(socksAddrRequest(netip.MustParseAddr(publicAddr), 443)))
	if code := socksReply(t, br); code != 0 {
		t.Fatalf("reply %#x", code)
	}
	roundTrip(t, c, br, "x")
	c.Close()
	if r := s.record(); !r.Relayed || r.Rule != "allow a_t network:"+publicAddr+":443 connect" {
		t.Fatalf("record %+v", r)
	}
}

// TestSOCKSMalformed: what the proxy does not serve is answered with the
// SOCKS code for it, or closed.
func TestSOCKSMalformed(t *testing.T) {
	s := newStage(t, Config{}, "api.example.com")
	for _, c := range []struct {
		raw  []byte
		want []byte
	}{
		{[]byte{5, 1, 2}, []byte{5, 0xff}},                                                            // username/password only
		{[]byte{5, 1, 0, 5, 2, 0, 3, 1, 'a', 0, 80}, []byte{5, 0, 5, 7}},                              // BIND
		{[]byte{5, 1, 0, 5, 3, 0, 3, 1, 'a', 0, 80}, []byte{5, 0, 5, 7}},                              // UDP ASSOCIATE
		{[]byte{5, 1, 0, 5, 1, 0, 9, 1, 'a', 0, 80}, []byte{5, 0, 5, 8}},                              // address type 9
		{[]byte{5, 1, 0, 5, 1, 1, 3, 1, 'a', 0, 80}, []byte{5, 0, 5, 1}},                              // reserved byte set
		{[]byte{5, 1, 0, 5, 1, 0, 3, 7, 'a', '.', 'b', '.', 'c', 'o', 'm', 0, 0}, []byte{5, 0, 5, 1}}, // port 0
		{[]byte{5, 0}, nil},                         // no methods
		{[]byte{4, 1, 0, 80, 127, 0, 0, 1, 0}, nil}, // SOCKS4
	} {
		conn, br := s.connect(string(c.raw))
		conn.(*net.TCPConn).CloseWrite()
		got, _ := io.ReadAll(br)
		if !bytes.HasPrefix(got, c.want) || len(c.want) == 0 && len(got) != 0 {
			t.Errorf("%v: got %v, want %v...", c.raw, got, c.want)
		}
		if r := s.record(); r.Relayed || r.Layer != LayerRequest {
			t.Errorf("%v: record %+v", c.raw, r)
		}
	}
	if d := s.dialledAddrs(); len(d) != 0 {
		t.Fatalf("dialled %v", d)
	}
}
