package netproxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestRelayCountsEachWay: bytes larger than a relay's buffer and than a
// budget's chunk pass whole and in order both ways, a client's half-close
// reaches the destination while the reply still flows back, and the
// record counts each direction exactly. A client that is not a socket
// (no descriptor to read with, no half-close) is relayed the same way.
func TestRelayCountsEachWay(t *testing.T) {
	const up, down = 3<<20 + 7, 2<<20 + 3
	for _, client := range []string{"tcp", "pipe"} {
		t.Run(client, func(t *testing.T) {
			// 10 MiB of net_bytes: chunks of an eighth of what is left.
			s := newStage(t, Config{Budget: Budget{Bytes: 10 << 20}}, "api.example.com")
			s.name("api.example.com", publicAddr)
			got := make(chan []byte, 1)
			s.server(publicAddr, 443, func(c net.Conn) {
				b, _ := io.ReadAll(io.LimitReader(c, up))
				if client == "tcp" { // the half-close arrived
					if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
						t.Errorf("after the client's half-close: %d %v", n, err)
					}
				}
				got <- b
				c.Write(bytes.Repeat([]byte{'d'}, down))
			})
			var c net.Conn
			if client == "tcp" {
				c, _ = s.connect("CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
			} else {
				var proxied net.Conn
				c, proxied = net.Pipe()
				go s.proxy.ServeConn(proxied)
				go io.WriteString(c, "CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			reply(t, br)
			sent := make([]byte, up)
			for i := range sent {
				sent[i] = byte(i % 251)
			}
			go func() {
				c.Write(sent)
				if tc, ok := c.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
			}()
			back, err := io.ReadAll(br)
			if err != nil || len(back) != down {
				t.Fatalf("down: %d bytes (%v), want %d", len(back), err, down)
			}
			if b := <-got; !bytes.Equal(b, sent) {
				t.Fatalf("up: %d bytes, not the %d sent", len(b), up)
			}
			r := s.record()
			if r.Layer != "" || !r.Relayed || r.BytesUp != up || r.BytesDown != down {
				t.Fatalf("record %+v", r)
			}
			if used, _ := s.proxy.Usage(); used != up+down {
				t.Fatalf("used %d, relayed %d", used, up+down)
			}
		})
	}
}

// TestRelayBuffersBounded: many directions with bytes ready at once (an
// agent streaming on many connections) hold at most cap(bigBufSlots)
// large buffers between them; the others read through a small one, and
// every byte still arrives. Releasing gives the slots back.
func TestRelayBuffersBounded(t *testing.T) {
	const conns = 100
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var readers []*reader
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := c.Write([]byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		r := newReader(s)
		b, err := r.read(1 << 20)
		if err != nil || string(b) != "0123456789" {
			t.Fatalf("connection %d: read %q, %v", i, b, err)
		}
		readers = append(readers, r)
	}
	big := 0
	for _, r := range readers {
		if r.big {
			big++
		}
	}
	if big > cap(bigBufSlots) || big == 0 || cap(bigBufSlots) > 64 {
		t.Fatalf("%d directions hold a large buffer, want 1..%d", big, cap(bigBufSlots))
	}
	for _, r := range readers {
		r.release()
	}
	if n := len(bigBufSlots); n != 0 {
		t.Fatalf("%d slots still held after every release", n)
	}
}
