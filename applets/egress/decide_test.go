package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"ctx/fsops/netproxy"
)

// keepAliveServer answers each line with "ok" and, when the client is
// done sending, keeps its side open, as an HTTP server holding an idle
// keep-alive connection may: only the run's end closes such a relay.
func keepAliveServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	t.Cleanup(func() {
		l.Close()
		close(held)
		for c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c
			go func() {
				br := bufio.NewReader(c)
				for {
					if _, err := br.ReadString('\n'); err != nil {
						return // EOF: the client is done; the server is not
					}
					io.WriteString(c, "ok\n")
				}
			}()
		}
	}()
	return l.Addr().String()
}

type publicName struct{}

func (publicName) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("203.0.113.10")}, nil
}

// TestRunEndRecordsKeepAliveAsClosed: a keep-alive connection the program
// left open is closed by the run's end (the proxy's Close) and recorded
// as that, an ok connection with layer closed and its bytes, never as a
// cancelled one, whichever side the program left it in.
func TestRunEndRecordsKeepAliveAsClosed(t *testing.T) {
	for _, clientEnd := range []string{"exited", "still open"} {
		t.Run(strings.ReplaceAll(clientEnd, " ", "_"), func(t *testing.T) {
			server := keepAliveServer(t)
			records := make(chan netproxy.Record, 4)
			p := netproxy.New(netproxy.Config{
				Decide: func(string, int) netproxy.Decision {
					return netproxy.Decision{Allowed: true, Rule: "allow a_t network:api.example.com connect"}
				},
				Resolver: publicName{},
				Dial: func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "tcp", server)
				},
				Report: func(r netproxy.Record) { records <- r },
			})
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go p.Serve(l)
			client, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			client.SetDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(client)
			fmt.Fprintf(client, "CONNECT api.example.com:443 HTTP/1.1\r\n\r\nhello\n")
			for line := ""; line != "ok\n"; {
				var err error
				if line, err = br.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
			}
			if clientEnd == "exited" {
				client.Close()
			}
			select {
			case r := <-records:
				t.Fatalf("the relay ended before the run did: %+v", r)
			case <-time.After(100 * time.Millisecond):
			}
			p.Close() // the run ends
			var r netproxy.Record
			select {
			case r = <-records:
			case <-time.After(2 * time.Second):
				t.Fatal("no record after the run's end")
			}
			if got := Status(r); got != "ok" || r.Layer != netproxy.LayerClosed || r.Reason != netproxy.ReasonRunEnded || !r.Relayed {
				t.Fatalf("status %s, record %+v", got, r)
			}
			if r.BytesUp != int64(len("hello\n")) || r.BytesDown != int64(len("ok\n")) {
				t.Fatalf("bytes up %d down %d", r.BytesUp, r.BytesDown)
			}
		})
	}
}
