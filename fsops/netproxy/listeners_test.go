package netproxy

import (
	"net"
	"os"
	"strings"
	"testing"
)

// The listeners cross the egress channel whole: each role its own
// socket, a forwarder that could not listen named, and a connection made
// to a listener after the crossing reaches the one received.
func TestListenersRoundTrip(t *testing.T) {
	host, init, err := NewEgressChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	var files []*os.File
	file := func(f interface{ File() (*os.File, error) }) int {
		fl, err := f.File()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fl)
		return int(fl.Fd())
	}
	proxy, _ := net.Listen("tcp4", "127.0.0.1:0")
	dnsTCP, _ := net.Listen("tcp4", "127.0.0.1:0")
	dnsUDP, _ := net.ListenPacket("udp4", "127.0.0.1:0")
	fwd, _ := net.Listen("tcp4", "127.0.0.1:0")
	fds := []int{file(proxy.(*net.TCPListener)), file(dnsTCP.(*net.TCPListener)), file(dnsUDP.(*net.UDPConn)), file(fwd.(*net.TCPListener))}
	roles := []string{RoleProxy, RoleDNSTCP, RoleDNSUDP, RoleFailed + " 0.0.0.0:22: address in use", RoleForward}
	if err := SendListeners(init, roles, fds); err != nil {
		t.Fatal(err)
	}
	init.Close()
	for _, c := range []interface{ Close() error }{proxy, dnsTCP, dnsUDP} {
		c.Close()
	}
	for _, f := range files {
		f.Close()
	}
	l, err := ReceiveListeners(host)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(l.Forward) != 1 || len(l.Failed) != 1 || l.Failed[0] != "0.0.0.0:22: address in use" {
		t.Fatalf("forwarders %d, failed %q", len(l.Forward), l.Failed)
	}
	fwd.Close() // the received one still listens
	c, err := net.Dial("tcp4", l.Forward[0].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got, err := l.Forward[0].Accept(); err != nil {
		t.Fatal(err)
	} else {
		got.Close()
	}
	// The init gone without sending: an error, not a wait.
	host2, init2, _ := NewEgressChannel()
	init2.Close()
	if _, err := ReceiveListeners(host2); err == nil || !strings.Contains(err.Error(), "ended without") {
		t.Fatalf("no message: %v", err)
	}
	host2.Close()
}

// A message whose roles and descriptors do not match one for one, or
// name an unknown role, or lack the proxy or DNS, is refused.
func FuzzListenersOf(f *testing.F) {
	for _, s := range []string{"proxy\ndns-tcp\ndns-udp", "failed 0.0.0.0:80: x", "forward", "", "proxy\nproxy"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		if l, err := listenersOf(strings.Split(msg, "\n"), nil); err == nil {
			t.Fatalf("no descriptors, yet listeners %+v", l)
		}
	})
}
