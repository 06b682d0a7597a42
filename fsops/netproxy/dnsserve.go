package netproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"
)

// dnsTCPIdle is how long a TCP client of the stub may take for each
// question before its connection is closed.
const dnsTCPIdle = 10 * time.Second

// ServeUDP answers the questions that arrive on pc until it is closed.
func (s *DNSStub) ServeUDP(pc net.PacketConn) error {
	buf := make([]byte, MaxDNSMessage+1)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if resp := s.Respond(buf[:n]); resp != nil {
			pc.WriteTo(resp, from)
		}
	}
}

// ServeTCP answers questions over TCP (two-byte length prefixes, RFC 1035
// 4.2.2) on the connections l accepts, until l is closed.
func (s *DNSStub) ServeTCP(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go s.serveTCPConn(c)
	}
}

func (s *DNSStub) serveTCPConn(c net.Conn) {
	defer c.Close()
	for {
		c.SetDeadline(time.Now().Add(dnsTCPIdle))
		var size [2]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(size[:]))
		if n == 0 || n > MaxDNSMessage {
			return
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		resp := s.Respond(msg)
		if resp == nil {
			return
		}
		if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(resp)))); err != nil {
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}
