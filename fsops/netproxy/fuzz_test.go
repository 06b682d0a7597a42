package netproxy

import (
	"bufio"
	"bytes"
	"io"
	"net/netip"
	"strings"
	"testing"
)

// Each parser the proxy puts between an agent and the network has a fuzz
// target; seeds live in testdata/fuzz/FuzzXxx/.

// FuzzParseRequestHead: a head readHead and parseRequestHead accept has
// a port 1-65535, a host without a control byte, blank, @ or %-escape
// that cleanHost would pass as is or refuse, and forwards as one head
// ending in Connection: close without a second Host header.
func FuzzParseRequestHead(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		head, err := readHead(bufio.NewReaderSize(bytes.NewReader(data), 16), 4096)
		if err != nil {
			return
		}
		req, err := parseRequestHead(head)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n\x00") {
				t.Fatalf("error not one line: %q", err)
			}
			return
		}
		if req.port < 1 || req.port > 65535 || req.host == "" || strings.ContainsAny(req.host, "@ \r\n\x00/") {
			t.Fatalf("accepted %+v from %q", req, head)
		}
		if host, r := cleanHost(req.host); r == nil && strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-:") != "" {
			t.Fatalf("cleanHost(%q) = %q", req.host, host)
		}
		if !req.connect {
			fwd := string(forwardHead(req))
			if !strings.HasSuffix(fwd, "\r\nConnection: close\r\n\r\n") || strings.Count(strings.ToLower(fwd), "\r\nhost:") != 1 ||
				strings.Count(fwd, "\r\n\r\n") != 1 {
				t.Fatalf("forwarded head %q", fwd)
			}
		}
	})
}

// FuzzReadSOCKS: a handshake readSOCKS accepts names a port 1-65535 and a
// host of at most 255 bytes; it never reads past the request.
func FuzzReadSOCKS(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		req, err := readSOCKS(r, io.Discard)
		if err != nil {
			return
		}
		if req.port < 1 || req.port > 65535 || len(req.host) > 255 {
			t.Fatalf("accepted %+v", req)
		}
		if _, err := netip.ParseAddr(req.host); err != nil && len(data)-r.Len() != 7+len(req.host)+2+int(data[1]) {
			t.Fatalf("read %d bytes of %d for %+v", len(data)-r.Len(), len(data), req)
		}
	})
}

// FuzzParseDNSQuery: a parsed query's host name is lower case, without
// empty labels; the stub's answer to any message echoes the ID, is a
// response, and answers at most one address, for a granted name only.
func FuzzParseDNSQuery(f *testing.F) {
	granted := netip.MustParseAddr("127.80.0.2")
	stub := &DNSStub{Answer: func(name string) (netip.Addr, bool) { return granted, name == "api.example.com" }}
	f.Fuzz(func(t *testing.T, msg []byte) {
		q, err := ParseDNSQuery(msg)
		if err == nil && q.HostName && (q.Name != strings.ToLower(q.Name) || strings.Contains(q.Name, "..") ||
			strings.HasPrefix(q.Name, ".") || strings.HasSuffix(q.Name, ".") || len(q.Name) > 254) {
			t.Fatalf("name %q", q.Name)
		}
		resp := stub.Respond(msg)
		if resp == nil {
			return
		}
		if len(resp) < dnsHeader || resp[0] != msg[0] || resp[1] != msg[1] || resp[2]&0x80 == 0 {
			t.Fatalf("response %v to %v", resp, msg)
		}
		if an := int(resp[6])<<8 | int(resp[7]); an > 1 || an == 1 && (err != nil || q.Name != "api.example.com") {
			t.Fatalf("answers %d for %q (%v)", an, q.Name, err)
		}
	})
}
