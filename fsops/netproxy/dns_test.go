package netproxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ctx/policy"
)

// dnsQuestion builds a query for name (labels as given) and qtype.
func dnsQuestion(id uint16, name string, qtype uint16) []byte {
	msg := []byte{byte(id >> 8), byte(id), 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range strings.Split(name, ".") {
		if l != "" {
			msg = append(msg, byte(len(l)))
			msg = append(msg, l...)
		}
	}
	msg = append(msg, 0)
	msg = binary.BigEndian.AppendUint16(msg, qtype)
	return binary.BigEndian.AppendUint16(msg, dnsClassIN)
}

// stubFor returns a stub answering what the policy grants, from a book,
// and the names it refused.
func stubFor(t *testing.T, rules string) (*DNSStub, *AddressBook, func() []string) {
	t.Helper()
	p, err := policy.ParsePolicy([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	g := policy.NetworkGrantsOf(p, "a_t")
	book, err := NewAddressBook(netip.MustParsePrefix("127.80.0.0/16"), 100)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []string
	stub := &DNSStub{
		Answer: book.Answerer(func(name string) bool { _, ok := g.NameGranted(name); return ok }),
		Refused: func(name string, _ uint16) {
			mu.Lock()
			refused = append(refused, name)
			mu.Unlock()
		},
	}
	return stub, book, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), refused...) }
}

// TestDNSStubAnswers: a granted name's A question gets its sandbox-local
// address, its AAAA and other questions an empty NOERROR; every other
// name NXDOMAIN, reported; malformed queries FORMERR or no answer.
func TestDNSStubAnswers(t *testing.T) {
	stub, book, refused := stubFor(t, "allow a_t network:api.example.com connect\nallow a_t network:*.example.org:22 connect\n")
	rcode := func(resp []byte) int { return int(binary.BigEndian.Uint16(resp[2:]) & 0xf) }
	ancount := func(resp []byte) int { return int(binary.BigEndian.Uint16(resp[6:])) }

	resp := stub.Respond(dnsQuestion(7, "API.Example.com", dnsTypeA))
	want, _ := book.Assign("api.example.com")
	if rcode(resp) != 0 || ancount(resp) != 1 || netip.AddrFrom4([4]byte(resp[len(resp)-4:])) != want || resp[0] != 0 || resp[1] != 7 {
		t.Fatalf("A answer %v", resp)
	}
	if q := dnsQuestion(7, "API.Example.com", dnsTypeA); string(resp[12:len(q)]) != string(q[12:]) {
		t.Fatal("question not echoed as asked (0x20 case randomisation breaks)")
	}
	if a, _ := book.Assign("x.example.org"); a == want || !netip.MustParsePrefix("127.80.0.0/16").Contains(a) {
		t.Fatalf("second name got %s", a)
	}
	for _, qt := range []uint16{dnsTypeAAAA, 15, 65} {
		if resp := stub.Respond(dnsQuestion(8, "api.example.com", qt)); rcode(resp) != 0 || ancount(resp) != 0 {
			t.Fatalf("type %d: %v", qt, resp)
		}
	}
	for _, name := range []string{"evil.example.com", "example.org", "localhost", "a_b.example.com"} {
		if resp := stub.Respond(dnsQuestion(9, name, dnsTypeA)); rcode(resp) != dnsNXDomain || ancount(resp) != 0 {
			t.Fatalf("%s: %v", name, resp)
		}
	}
	if got := refused(); strings.Join(got, " ") != "evil.example.com example.org localhost a_b.example.com" {
		t.Fatalf("refused %q", got)
	}
	if resp := stub.Respond(append(dnsQuestion(1, "api.example.com", dnsTypeA)[:12], 3, 'a', '.', 'b', 0, 0, 1, 0, 1)); rcode(resp) != dnsNXDomain {
		t.Fatalf("a dot inside a label: %v", resp)
	}
	if got := refused(); got[len(got)-1] != `a\46b` {
		t.Fatalf("escaped name %q", got[len(got)-1])
	}
	malformed := map[string][]byte{
		"compressed":          append(dnsQuestion(1, "", dnsTypeA)[:12], 0xc0, 12, 0, 1, 0, 1),
		"pointer-sized label": append(append(append(dnsQuestion(1, "", dnsTypeA)[:12], 0xc0), strings.Repeat("a", 192)...), 0, 0, 1, 0, 1),
		"extended label":      append(append(append(dnsQuestion(1, "", dnsTypeA)[:12], 0x40), strings.Repeat("a", 64)...), 0, 0, 1, 0, 1),
		"two questions":       func() []byte { m := dnsQuestion(1, "a.example.com", 1); m[5] = 2; return m }(),
		"an answer":           func() []byte { m := dnsQuestion(1, "a.example.com", 1); m[7] = 1; return m }(),
		"trailing":            append(dnsQuestion(1, "a.example.com", 1), 0),
		"short":               dnsQuestion(1, "a.example.com", 1)[:20],
		"truncated":           func() []byte { m := dnsQuestion(1, "a.example.com", 1); m[2] |= 2; return m }(),
		"not OPT": func() []byte {
			m := dnsQuestion(1, "a.example.com", 1)
			m[11] = 1
			return append(m, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0)
		}(),
	}
	for what, m := range malformed {
		if resp := stub.Respond(m); resp == nil || rcode(resp) != dnsFormErr {
			t.Errorf("%s: %v", what, resp)
		}
	}
	notImp := dnsQuestion(1, "a.example.com", 1)
	notImp[2] |= 2 << 3 // opcode STATUS
	if resp := stub.Respond(notImp); rcode(resp) != dnsNotImp {
		t.Errorf("opcode: %v", resp)
	}
	response := dnsQuestion(1, "api.example.com", 1)
	response[2] |= 0x80
	for what, m := range map[string][]byte{"a response": response, "a header's half": response[:6]} {
		if resp := stub.Respond(m); resp != nil {
			t.Errorf("%s answered: %v", what, resp)
		}
	}
	edns := dnsQuestion(1, "api.example.com", 1)
	edns[11] = 1
	edns = append(edns, 0, 0, 41, 4, 0, 0, 0, 0, 0, 0, 0)
	if resp := stub.Respond(edns); rcode(resp) != 0 || ancount(resp) != 1 {
		t.Errorf("EDNS query: %v", resp)
	}
}

// TestDNSStubWithRealResolver: Go's own resolver, pointed at the stub
// over UDP and TCP, gets the granted name's address and a prompt
// not-found for every other name.
func TestDNSStubWithRealResolver(t *testing.T) {
	stub, book, _ := stubFor(t, "allow a_t network:api.example.com connect\n")
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go stub.ServeUDP(pc)
	go stub.ServeTCP(l)
	for _, network := range []string{"udp", "tcp"} {
		addr := pc.LocalAddr().String()
		if network == "tcp" {
			addr = l.Addr().String()
		}
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := r.LookupNetIP(ctx, "ip", "api.example.com")
		want, _ := book.Assign("api.example.com")
		if err != nil || len(got) != 1 || got[0] != want {
			t.Fatalf("%s: %v %v, want %s", network, got, err, want)
		}
		start := time.Now()
		_, err = r.LookupNetIP(ctx, "ip", "registry.npmjs.org")
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound || time.Since(start) > time.Second {
			t.Fatalf("%s: ungranted name: %v after %v", network, err, time.Since(start))
		}
		cancel()
	}
}

// TestAddressBook: addresses come from the prefix, never 127.0.0.1 or
// the prefix's ends; a name keeps its address; the book's bound holds.
func TestAddressBook(t *testing.T) {
	if _, err := NewAddressBook(netip.MustParsePrefix("10.0.0.0/8"), 0); err == nil {
		t.Fatal("a book outside the loopback")
	}
	b, err := NewAddressBook(netip.MustParsePrefix("127.0.0.0/30"), 0)
	if err != nil {
		t.Fatal(err)
	}
	a1, err := b.Assign("a.example.com")
	if err != nil || a1 != netip.MustParseAddr("127.0.0.2") {
		t.Fatalf("first address %s %v", a1, err)
	}
	if again, _ := b.Assign("A.example.com."); again != a1 {
		t.Fatalf("same name, %s", again)
	}
	if _, err := b.Assign("b.example.com"); err != ErrBookFull {
		t.Fatalf("past the prefix: %v", err)
	}
	if err := b.Bind("localhost", netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Bind("evil.example.com", netip.MustParseAddr("127.0.0.1")); err == nil {
		t.Fatal("an address bound twice")
	}
	if name, ok := b.Name(netip.MustParseAddr("127.0.0.1")); !ok || name != "localhost" {
		t.Fatalf("Name = %q %v", name, ok)
	}
	small, _ := NewAddressBook(netip.MustParsePrefix("127.81.0.0/16"), 2)
	small.Assign("a.example.com")
	small.Assign("b.example.com")
	if _, err := small.Assign("c.example.com"); err != ErrBookFull {
		t.Fatalf("past max: %v", err)
	}
}

// TestForwardByLocalAddress: a proxy-unaware client connecting to the
// address the stub gave a name reaches that name's destination at the
// same port; an address the book does not know is refused; a revoked
// name is refused even though the stub answered it before.
func TestForwardByLocalAddress(t *testing.T) {
	book, err := NewAddressBook(netip.MustParsePrefix("127.82.0.0/16"), 0)
	if err != nil {
		t.Fatal(err)
	}
	local, _ := book.Assign("git.example.com")
	l, err := net.Listen("tcp", netip.AddrPortFrom(local, 0).String())
	if err != nil {
		t.Skipf("cannot listen on %s: %v", local, err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	s := newStage(t, Config{}, "git.example.com:"+strconv.Itoa(port))
	s.name("git.example.com", publicAddr)
	s.server(publicAddr, port, echo)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go s.proxy.ServeForward(c, book)
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	roundTrip(t, c, bufio.NewReader(c), "ssh-2.0")
	c.Close()
	if r := s.record(); r.Via != "forward" || r.Host != "git.example.com" || r.Port != port || !r.Relayed {
		t.Fatalf("record %+v", r)
	}
	s.setGrants()
	c, _ = net.Dial("tcp", l.Addr().String())
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("revoked name still forwarded")
	}
	if r := s.record(); r.Layer != "agent-policy" {
		t.Fatalf("record %+v", r)
	}
	unknown, err := net.Listen("tcp", "127.83.0.9:0")
	if err != nil {
		t.Skip(err)
	}
	defer unknown.Close()
	go func() {
		if c, err := unknown.Accept(); err == nil {
			s.proxy.ServeForward(c, book)
		}
	}()
	c, _ = net.Dial("tcp", unknown.Addr().String())
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Read(make([]byte, 1))
	if r := s.record(); r.Layer != LayerRequest || !strings.Contains(r.Reason, "no name") {
		t.Fatalf("unknown address: %+v", r)
	}
}
