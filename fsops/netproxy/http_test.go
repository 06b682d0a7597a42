package netproxy

import (
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConnectGrantedName: CONNECT to a granted name is relayed to the
// address the name resolved to, and recorded with bytes each way.
func TestConnectGrantedName(t *testing.T) {
	s := newStage(t, Config{}, "api.example.com")
	s.name("api.example.com", publicAddr)
	s.server(publicAddr, 443, echo)
	c, br := s.connect("CONNECT API.example.com.:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\nearly")
	if status, _ := reply(t, br); status != "HTTP/1.1 200 Connection established" {
		t.Fatalf("status %q", status)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "early" {
		t.Fatalf("bytes sent with the request: %q %v", got, err)
	}
	roundTrip(t, c, br, "hello")
	c.Close()
	r := s.record()
	want := netip.MustParseAddrPort(publicAddr + ":443")
	if r.Via != "http-connect" || r.Host != "api.example.com" || r.Port != 443 || !r.Relayed || r.Layer != "" ||
		r.Addr != want || r.BytesUp != 10 || r.BytesDown != 10 || r.Rule != "allow a_t network:api.example.com connect" {
		t.Fatalf("record %+v", r)
	}
	if d := s.dialledAddrs(); len(d) != 1 || d[0] != want {
		t.Fatalf("dialled %v", d)
	}
}

// TestConnectRefusals: what a hostile client tries instead of a granted
// name is refused with a status and a one-line reason, and nothing is
// dialled or resolved for it.
func TestConnectRefusals(t *testing.T) {
	s := newStage(t, Config{}, "api.example.com")
	s.name("api.example.com", publicAddr)
	s.name("evil.example.com", publicAddr)
	cases := []struct {
		raw, status, body, layer string
	}{
		{"CONNECT evil.example.com:443 HTTP/1.1\r\n\r\n", "403", "allow a_t network:evil.example.com connect", "agent-policy"},
		{"CONNECT " + publicAddr + ":443 HTTP/1.1\r\n\r\n", "403", "network:" + publicAddr + " connect", "agent-policy"},
		{"CONNECT [::ffff:203.0.113.10]:443 HTTP/1.1\r\n\r\n", "403", "network:" + publicAddr + " connect", "agent-policy"},
		{"CONNECT api.example.com:8443 HTTP/1.1\r\n\r\n", "403", "network:api.example.com:8443", "agent-policy"},
		{"CONNECT api.example.com\x00.evil.example.com:443 HTTP/1.1\r\n\r\n", "400", `target byte '\x00'`, "request"},
		{"CONNECT api.example.com%2eevil.example.com:443 HTTP/1.1\r\n\r\n", "400", `byte '%'`, "request"},
		{"CONNECT user@api.example.com:443 HTTP/1.1\r\n\r\n", "400", "userinfo", "request"},
		{"CONNECT api.example.com:443\r\nHost: evil.example.com:443 HTTP/1.1\r\n\r\n", "400", "not METHOD TARGET VERSION", "request"},
		{"CONNECT api.example.com\r:443 HTTP/1.1\r\n\r\n", "400", "bare CR", "request"},
		{"CONNECT api.example.com:443 HTTP/1.1\nHost: x\n\n", "400", "", "request"},
		{"CONNECT api.example.com HTTP/1.1\r\n\r\n", "400", "no port", "request"},
		{"CONNECT api.example.com:0443 HTTP/1.1\r\n\r\n", "400", "port", "request"},
		{"CONNECT api.example.com:443 HTTP/1.1\r\nHost: evil.example.com\r\n\r\n", "400", "Host header names", "request"},
		{"CONNECT 2130706433:80 HTTP/1.1\r\n\r\n", "400", "not a canonical IPv4", "request"},
		{"CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", "400", "not an IPv6 address", "request"},
		{"CONNECT [::1]:22 HTTP/1.1\r\n\r\n", "403", "network:localhost:22", "agent-policy"},
		{"CONNECT localhost:22 HTTP/1.1\r\n\r\n", "403", "network:localhost:22", "agent-policy"},
		{"CONNECT intranet:443 HTTP/1.1\r\n\r\n", "400", "single label", "request"},
		{"GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "400", "not an absolute http:// URI", "request"},
		{"GET https://api.example.com/ HTTP/1.1\r\n\r\n", "400", "goes through CONNECT", "request"},
		{"GET http://api.example.com/ HTTP/1.1\r\nHost: evil.example.com\r\n\r\n", "400", "Host header names", "request"},
		{"GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\nHost: evil.example.com\r\n\r\n", "400", "more than one Host", "request"},
		{"GET http://user:pw@api.example.com/ HTTP/1.1\r\n\r\n", "400", "userinfo", "request"},
		{"GET http://api.example.com/#frag HTTP/1.1\r\n\r\n", "400", "fragment", "request"},
		{"GET http://api.example.com/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", "400", "not NAME: VALUE", "request"},
		{"GET http://api.example.com/ HTTP/2.0\r\n\r\n", "400", "version", "request"},
		{"\r\nCONNECT api.example.com:443 HTTP/1.1\r\n\r\n", "", "", "request"},
	}
	for _, c := range cases {
		_, br := s.connect(c.raw)
		status, body := "", ""
		if c.status != "" {
			status, body = reply(t, br)
		}
		r := s.record()
		if !strings.Contains(status, c.status) || !strings.Contains(body, c.body) || r.Layer != c.layer || r.Relayed {
			t.Errorf("%q: %q %q, record %+v; want %s with %q by %s", c.raw, status, body, r, c.status, c.body, c.layer)
		}
		if strings.Count(body, "\n") > 1 {
			t.Errorf("%q: body is not one line: %q", c.raw, body)
		}
	}
	if d := s.dialledAddrs(); len(d) != 0 {
		t.Fatalf("dialled %v", d)
	}
	if len(s.lookups) != 0 {
		t.Fatalf("resolved %v", s.lookups)
	}
}

// TestPlainHTTPForwarded: an absolute-URI request goes to the host it
// names in origin-form, with that Host, Connection: close and no proxy
// credentials; a second request pipelined behind it for another host
// reaches only the first destination.
func TestPlainHTTPForwarded(t *testing.T) {
	s := newStage(t, Config{}, "api.example.com")
	s.name("api.example.com", publicAddr)
	heads := make(chan string, 1)
	s.server(publicAddr, 80, func(c net.Conn) {
		all, _ := io.ReadAll(c) // the proxy closes its write side after the client's
		heads <- string(all)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	c, br := s.connect("POST http://api.example.com/v1/x?q=1 HTTP/1.1\r\nHost: api.example.com\r\nProxy-Authorization: Basic c2VjcmV0\r\n" +
		"Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nContent-Length: 4\r\n\r\nbody" +
		"GET http://evil.example.com/ HTTP/1.1\r\nHost: evil.example.com\r\n\r\n")
	c.(*net.TCPConn).CloseWrite()
	status, body := reply(t, br)
	if status != "HTTP/1.1 200 OK" || body != "ok" {
		t.Fatalf("reply %q %q", status, body)
	}
	got := <-heads
	want := "POST /v1/x?q=1 HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody" +
		"GET http://evil.example.com/ HTTP/1.1\r\nHost: evil.example.com\r\n\r\n"
	if got != want {
		t.Fatalf("destination got\n%q\nwant\n%q", got, want)
	}
	if r := s.record(); r.Via != "http" || !r.Relayed || r.Host != "api.example.com" || r.Port != 80 {
		t.Fatalf("record %+v", r)
	}
	if d := s.dialledAddrs(); len(d) != 1 {
		t.Fatalf("dialled %v", d)
	}
}

// TestNameResolvingToLocalAddresses: a granted name whose answer is a
// loopback, private, link-local, shared or unspecified address is refused
// (no DNS rebinding onto the person's services); a mixed answer dials
// only its public address; a private address granted itself is reached.
func TestNameResolvingToLocalAddresses(t *testing.T) {
	s := newStage(t, Config{}, "*.example.com", "*.example.com:8443", "10.0.0.5:443")
	s.server(publicAddr, 443, echo)
	s.server("10.0.0.5", 443, echo)
	for name, answer := range map[string]string{"lo.example.com": "127.0.0.1", "lo6.example.com": "::1",
		"lan.example.com": "192.168.1.1", "ula.example.com": "fd00::1", "ll.example.com": "169.254.169.254",
		"cgnat.example.com": "100.64.0.1", "zero.example.com": "0.0.0.0", "nat64.example.com": "64:ff9b::7f00:1",
		"mapped.example.com": "::ffff:127.0.0.1", "lan8443.example.com": "10.0.0.5"} {
		s.name(name, answer)
		port := "443"
		if name == "lan8443.example.com" {
			port = "8443"
		}
		_, br := s.connect("CONNECT " + name + ":" + port + " HTTP/1.1\r\n\r\n")
		status, body := reply(t, br)
		r := s.record()
		if !strings.HasPrefix(status, "HTTP/1.1 403") || r.Layer != LayerAddress || !strings.Contains(body, "resolved to") {
			t.Errorf("%s -> %s: %q %q %+v", name, answer, status, body, r)
		}
	}
	if d := s.dialledAddrs(); len(d) != 0 {
		t.Fatalf("dialled %v", d)
	}
	s.name("mixed.example.com", "127.0.0.1", publicAddr)
	s.name("granted-lan.example.com", "10.0.0.5")
	for _, name := range []string{"mixed.example.com", "granted-lan.example.com"} {
		c, br := s.connect("CONNECT " + name + ":443 HTTP/1.1\r\n\r\n")
		if status, _ := reply(t, br); status != "HTTP/1.1 200 Connection established" {
			t.Fatalf("%s: %q", name, status)
		}
		roundTrip(t, c, br, "x")
		c.Close()
		s.record()
	}
	want := []netip.AddrPort{netip.MustParseAddrPort(publicAddr + ":443"), netip.MustParseAddrPort("10.0.0.5:443")}
	if d := s.dialledAddrs(); len(d) != 2 || d[0] != want[0] || d[1] != want[1] {
		t.Fatalf("dialled %v, want %v", d, want)
	}
}

// TestLocalhostGrant: localhost:PORT reaches the host's loopback at that
// port without asking the resolver; no other port, and no name, does.
func TestLocalhostGrant(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); echo(c) }()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	s := newStage(t, Config{}, "localhost:"+strconv.Itoa(port))
	c, br := s.connect("CONNECT localhost:" + strconv.Itoa(port) + " HTTP/1.1\r\n\r\n")
	if status, _ := reply(t, br); status != "HTTP/1.1 200 Connection established" {
		t.Fatalf("status %q", status)
	}
	roundTrip(t, c, br, "dev server")
	c.Close()
	if r := s.record(); r.Addr.Addr() != netip.MustParseAddr("127.0.0.1") || !r.Relayed {
		t.Fatalf("record %+v", r)
	}
	if len(s.lookups) != 0 {
		t.Fatalf("resolver asked %v", s.lookups)
	}
}

// TestSlowAndOversizedClients: a client dribbling its request is cut at
// the header deadline however often it sends a byte; a head over the
// bound is refused before it is parsed.
func TestSlowAndOversizedClients(t *testing.T) {
	s := newStage(t, Config{HeaderTimeout: 300 * time.Millisecond, MaxHeaderBytes: 1024}, "api.example.com")
	c, br := s.connect("C")
	start := time.Now()
	go func() {
		for i := 0; i < 40; i++ {
			time.Sleep(50 * time.Millisecond)
			if _, err := c.Write([]byte("X")); err != nil {
				return
			}
		}
	}()
	status, _ := reply(t, br)
	if r := s.record(); status != "HTTP/1.1 408 Request Timeout" || r.Layer != LayerTimeout || time.Since(start) > 2*time.Second {
		t.Fatalf("slow client: %q %+v after %v", status, r, time.Since(start))
	}
	_, br = s.connect("CONNECT api.example.com:443 HTTP/1.1\r\nX: " + strings.Repeat("a", 2000) + "\r\n\r\n")
	if status, _ := reply(t, br); status != "HTTP/1.1 431 Request Header Fields Too Large" {
		t.Fatalf("oversized: %q", status)
	}
	if r := s.record(); r.Layer != LayerRequest {
		t.Fatalf("record %+v", r)
	}
	sc, _ := s.connect("\x05")
	sc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := sc.Read(make([]byte, 1)); err == nil {
		t.Fatal("slow SOCKS client answered")
	}
	if r := s.record(); r.Layer != LayerTimeout || r.Via != "socks5" {
		t.Fatalf("slow SOCKS record %+v", r)
	}
	_, br = s.connect("\x16\x03\x01")
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("TLS to the proxy port: %v", err)
	}
	if r := s.record(); r.Layer != LayerRequest {
		t.Fatalf("record %+v", r)
	}
}
