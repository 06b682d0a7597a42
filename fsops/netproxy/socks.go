package netproxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS5 (RFC 1928), no authentication, CONNECT only.
const (
	socksVersion     = 5
	socksNoAuth      = 0x00
	socksNoMethod    = 0xff
	socksConnect     = 0x01
	socksIPv4        = 0x01
	socksDomain      = 0x03
	socksIPv6        = 0x04
	socksOK          = 0x00
	socksFailure     = 0x01
	socksNotAllowed  = 0x02 // connection not allowed by ruleset
	socksUnreachable = 0x04 // host unreachable
	socksRefused     = 0x05 // connection refused
	socksBadCommand  = 0x07
	socksBadAddrType = 0x08
)

// socksRequest is a SOCKS5 CONNECT request: a name, or an address as
// text (IPv6 without brackets).
type socksRequest struct {
	host string
	port int
}

// socksError is a failed handshake and the reply code it answers with (0:
// no reply, the connection is just closed).
type socksError struct {
	code byte
	msg  string
}

func (e *socksError) Error() string { return e.msg }

// readSOCKS reads the greeting, answers it on w, and reads the request.
func readSOCKS(r io.Reader, w io.Writer) (socksRequest, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return socksRequest{}, err
	}
	if hdr[0] != socksVersion || hdr[1] == 0 {
		return socksRequest{}, &socksError{0, "not a SOCKS5 greeting"}
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return socksRequest{}, err
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == socksNoAuth
	}
	if !noAuth {
		w.Write([]byte{socksVersion, socksNoMethod})
		return socksRequest{}, &socksError{0, "the client offers no method without authentication"}
	}
	if _, err := w.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return socksRequest{}, err
	}
	var req [4]byte
	if _, err := io.ReadFull(r, req[:]); err != nil {
		return socksRequest{}, err
	}
	switch {
	case req[0] != socksVersion || req[2] != 0:
		return socksRequest{}, &socksError{socksFailure, "malformed SOCKS5 request"}
	case req[1] != socksConnect:
		return socksRequest{}, &socksError{socksBadCommand, fmt.Sprintf("SOCKS5 command %d: only CONNECT is served", req[1])}
	}
	host, err := readSOCKSAddr(r, req[3])
	if err != nil {
		return socksRequest{}, err
	}
	var port [2]byte
	if _, err := io.ReadFull(r, port[:]); err != nil {
		return socksRequest{}, err
	}
	p := int(binary.BigEndian.Uint16(port[:]))
	if p == 0 {
		return socksRequest{}, &socksError{socksFailure, "port 0"}
	}
	return socksRequest{host, p}, nil
}

func readSOCKSAddr(r io.Reader, atyp byte) (string, error) {
	switch atyp {
	case socksIPv4, socksIPv6:
		b := make([]byte, 4)
		if atyp == socksIPv6 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		a, _ := netip.AddrFromSlice(b)
		return a.Unmap().String(), nil
	case socksDomain:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return "", err
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(r, name); err != nil {
			return "", err
		}
		return string(name), nil
	}
	return "", &socksError{socksBadAddrType, fmt.Sprintf("SOCKS5 address type %d", atyp)}
}

func writeSOCKSReply(w io.Writer, code byte) error {
	if c, ok := w.(net.Conn); ok {
		c.SetWriteDeadline(time.Now().Add(replyTimeout))
	}
	_, err := w.Write([]byte{socksVersion, code, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

// socksCode is the reply a refusal by layer answers with.
func socksCode(layer string) byte {
	switch layer {
	case LayerResolve:
		return socksUnreachable
	case LayerDial:
		return socksRefused
	}
	return socksNotAllowed
}

// serveSOCKS serves a SOCKS5 CONNECT: by name, or by address, which the
// decision refuses unless the address itself is granted.
func (p *Proxy) serveSOCKS(c net.Conn, br *bufio.Reader, rec *Record) {
	req, err := readSOCKS(br, c)
	if err != nil {
		var se *socksError
		layer := handshakeLayer(err)
		if errors.As(err, &se) && se.code != 0 {
			writeSOCKSReply(c, se.code)
		}
		p.refuse(&refusal{layer: layer, reason: "SOCKS5: " + err.Error()}, rec)
		return
	}
	rec.Port = req.port
	host, r := cleanHost(req.host)
	if r != nil {
		writeSOCKSReply(c, socksNotAllowed)
		p.refuse(r, rec)
		return
	}
	rec.Host = host
	up, r := p.dialTarget(host, req.port, rec)
	if r != nil {
		writeSOCKSReply(c, socksCode(r.layer))
		p.refuse(r, rec)
		return
	}
	if err := writeSOCKSReply(c, socksOK); err != nil {
		up.Close()
		p.refuse(&refusal{layer: LayerRequest, reason: "client gone: " + err.Error()}, rec)
		return
	}
	c.SetDeadline(time.Time{})
	early, _ := br.Peek(br.Buffered())
	p.relayConn(c, up, early, host, req.port, rec)
	p.report(rec)
}
