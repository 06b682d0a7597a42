package netproxy

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// serveHTTP serves an HTTP proxy request: CONNECT, or a plain request
// with an absolute http:// URI, which is sent on in origin-form.
func (p *Proxy) serveHTTP(c net.Conn, br *bufio.Reader, rec *Record) {
	head, err := readHead(br, p.cfg.MaxHeaderBytes)
	if err != nil {
		code, layer := 400, handshakeLayer(err)
		switch {
		case errors.Is(err, errHeadTooLarge):
			code = 431
		case layer == LayerTimeout:
			code = 408
		}
		p.refuseHTTP(c, code, &refusal{layer: layer, reason: "request head: " + err.Error()}, rec)
		return
	}
	req, err := parseRequestHead(head)
	if err != nil {
		p.refuseHTTP(c, 400, &refusal{layer: LayerRequest, reason: err.Error()}, rec)
		return
	}
	if req.connect {
		rec.Via = "http-connect"
	}
	host, r := cleanHost(req.host)
	rec.Port = req.port
	if r != nil {
		p.refuseHTTP(c, 400, r, rec)
		return
	}
	rec.Host = host
	up, r := p.dialTarget(host, req.port, rec)
	if r != nil {
		p.refuseHTTP(c, statusFor(r.layer), r, rec)
		return
	}
	var early []byte
	if req.connect {
		if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			up.Close()
			rec.Layer, rec.Reason = LayerRequest, "client gone: "+err.Error()
			p.report(rec)
			return
		}
	} else {
		early = forwardHead(req)
	}
	c.SetDeadline(time.Time{})
	buffered, _ := br.Peek(br.Buffered())
	early = append(early, buffered...)
	p.relayConn(c, up, early, host, req.port, rec)
	p.report(rec)
}

// replyTimeout bounds writing a refusal to a client that does not read.
const replyTimeout = time.Second

// statusFor is the HTTP status a refusal by layer answers with.
func statusFor(layer string) int {
	switch layer {
	case LayerRequest:
		return 400
	case LayerResolve, LayerDial:
		return 502
	}
	return 403
}

var statusText = map[int]string{400: "Bad Request", 403: "Forbidden", 408: "Request Timeout",
	431: "Request Header Fields Too Large", 502: "Bad Gateway"}

// refuseHTTP answers a refused request with its status and a one-line
// body naming the layer, the reason and what would allow it, and records
// it.
func (p *Proxy) refuseHTTP(c net.Conn, code int, r *refusal, rec *Record) {
	body := r.line() + "\n"
	c.SetWriteDeadline(time.Now().Add(replyTimeout))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nX-Ctx-Refused-By: %s\r\n\r\n%s",
		code, statusText[code], len(body), oneLine(r.layer), body)
	p.refuse(r, rec)
}

func (p *Proxy) refuse(r *refusal, rec *Record) {
	rec.Layer, rec.Reason = r.layer, r.reason
	if r.rule != "" {
		rec.Rule = r.rule
	}
	p.report(rec)
}

// ServeForward serves a connection accepted on a sandbox-local address
// the DNS stub gave a name: the name is the book's for the connection's
// local address, the port its local port, and the connection is served
// as a CONNECT to name:port would be, without a handshake.
func (p *Proxy) ServeForward(c net.Conn, book *AddressBook) {
	rec := Record{Start: time.Now(), Via: "forward"}
	defer c.Close()
	if !p.enter(c, &rec) {
		return
	}
	defer p.open.Add(-1)
	local, ok := c.LocalAddr().(*net.TCPAddr)
	var name string
	if ok {
		rec.Port = local.Port
		name, ok = book.Name(local.AddrPort().Addr())
	}
	if !ok {
		p.refuse(&refusal{layer: LayerRequest, reason: "no name for the local address " + strconv.Quote(c.LocalAddr().String())}, &rec)
		return
	}
	rec.Host = name
	up, r := p.dialTarget(name, rec.Port, &rec)
	if r != nil {
		p.refuse(r, &rec)
		return
	}
	p.relayConn(c, up, nil, name, rec.Port, &rec)
	p.report(&rec)
}
