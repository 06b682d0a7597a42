package netproxy

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// httpRequest is an HTTP proxy request head, checked.
type httpRequest struct {
	method    string
	connect   bool
	host      string // as the target writes it, brackets removed
	port      int
	authority string // host[:port] as the target writes it
	path      string // origin-form, for a forwarded request
	version   string
	headers   []header
}

type header struct{ name, value string }

var (
	errHeadTooLarge = errors.New("request head too large")
	errHeadLine     = errors.New("an empty line before the request line")
	errBareLF       = errors.New("a line ends in LF without CR")
)

// readHead reads an HTTP request head up to and including its empty
// line, at most max bytes; the body stays in br.
func readHead(br *bufio.Reader, max int) ([]byte, error) {
	var head []byte
	lineStart := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if len(head)+len(chunk) > max {
			return nil, errHeadTooLarge
		}
		head = append(head, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return nil, err
		}
		line := head[lineStart:]
		if len(line) < 2 || line[len(line)-2] != '\r' {
			return nil, errBareLF
		}
		if len(line) == 2 {
			if lineStart == 0 {
				return nil, errHeadLine
			}
			return head, nil
		}
		lineStart = len(head)
	}
}

// parseRequestHead checks a request head strictly: CRLF line ends only,
// a request line of exactly three fields, HTTP/1.0 or 1.1, header names
// of token bytes, values without control bytes, no folded lines. A
// CONNECT target is host:port; any other method's is an absolute http://
// URI, without userinfo or fragment, whose authority a Host header, if
// any, must repeat: the host decided on is the host the request reaches.
func parseRequestHead(head []byte) (httpRequest, error) {
	text, ok := strings.CutSuffix(string(head), "\r\n\r\n")
	if !ok {
		return httpRequest{}, errors.New("the head does not end in an empty line")
	}
	lines := strings.Split(text, "\r\n")
	for _, l := range lines {
		if strings.ContainsAny(l, "\r\n") {
			return httpRequest{}, errors.New("a bare CR or LF in the head")
		}
	}
	req, err := parseRequestLine(lines[0])
	if err != nil {
		return httpRequest{}, err
	}
	for _, l := range lines[1:] {
		h, err := parseHeader(l)
		if err != nil {
			return httpRequest{}, err
		}
		req.headers = append(req.headers, h)
	}
	return req, checkHostHeader(req)
}

func parseRequestLine(line string) (httpRequest, error) {
	f := strings.Split(line, " ")
	if len(f) != 3 {
		return httpRequest{}, fmt.Errorf("request line %s is not METHOD TARGET VERSION", strconv.QuoteToASCII(truncate(line)))
	}
	req := httpRequest{method: f[0], version: f[2]}
	if !isToken(req.method) {
		return req, fmt.Errorf("method %s is not a token", strconv.QuoteToASCII(truncate(req.method)))
	}
	if req.version != "HTTP/1.1" && req.version != "HTTP/1.0" {
		return req, fmt.Errorf("version %s is not HTTP/1.1 or HTTP/1.0", strconv.QuoteToASCII(truncate(req.version)))
	}
	target := f[1]
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= 0x20 || c >= 0x7f {
			return req, fmt.Errorf("target byte %q is not visible ASCII", c)
		}
	}
	if req.method == "CONNECT" {
		req.connect = true
		host, port, err := parseAuthority(target, 0)
		if err != nil {
			return req, err
		}
		req.host, req.port, req.authority = host, port, target
		return req, nil
	}
	scheme, rest, ok := strings.Cut(target, "://")
	if !ok || !strings.EqualFold(scheme, "http") {
		if ok && strings.EqualFold(scheme, "https") {
			return req, errors.New("an https:// URI goes through CONNECT, not as a plain request")
		}
		return req, fmt.Errorf("target %s is not an absolute http:// URI (this is a proxy)", strconv.QuoteToASCII(truncate(target)))
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	req.authority, req.path = rest[:end], rest[end:]
	if strings.HasPrefix(req.path, "?") || req.path == "" {
		req.path = "/" + req.path
	}
	for i := 0; i < len(req.path); i++ {
		if req.path[i] == '#' {
			return req, errors.New("a fragment is never sent")
		}
	}
	host, port, err := parseAuthority(req.authority, 80)
	req.host, req.port = host, port
	return req, err
}

// parseAuthority splits host:port; defPort is used when the port is
// absent (0: the port is required). Userinfo is refused.
func parseAuthority(a string, defPort int) (string, int, error) {
	q := strconv.QuoteToASCII(truncate(a))
	if strings.IndexByte(a, '@') >= 0 {
		return "", 0, fmt.Errorf("authority %s has userinfo", q)
	}
	host, portText := a, ""
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("authority %s lacks its ]", q)
		}
		host, portText = a[1:end], a[end+1:]
		if portText != "" && portText[0] != ':' {
			return "", 0, fmt.Errorf("authority %s: after ] comes :PORT", q)
		}
	} else if i := strings.IndexByte(a, ':'); i >= 0 {
		host, portText = a[:i], a[i:]
	}
	if host == "" {
		return "", 0, fmt.Errorf("authority %s has no host", q)
	}
	if portText == "" {
		if defPort == 0 {
			return "", 0, fmt.Errorf("authority %s has no port", q)
		}
		return host, defPort, nil
	}
	port, err := parsePort(portText[1:])
	if err != nil {
		return "", 0, fmt.Errorf("authority %s: %v", q, err)
	}
	return host, port, nil
}

// parsePort parses a decimal port 1-65535 without sign or leading zero.
func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, errors.New("port is not 1-65535")
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("port is not a decimal number")
		}
		n = n*10 + int(s[i]-'0')
	}
	if n > 65535 {
		return 0, errors.New("port is over 65535")
	}
	return n, nil
}

func parseHeader(l string) (header, error) {
	name, value, ok := strings.Cut(l, ":")
	if !ok || !isToken(name) {
		return header{}, fmt.Errorf("header line %s is not NAME: VALUE", strconv.QuoteToASCII(truncate(l)))
	}
	value = strings.Trim(value, " \t")
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return header{}, fmt.Errorf("header %s has the control byte %q", name, c)
		}
	}
	return header{name, value}, nil
}

// checkHostHeader: at most one Host header, naming the target's host (and
// its port when it gives one).
func checkHostHeader(req httpRequest) error {
	var hosts []string
	for _, h := range req.headers {
		if strings.EqualFold(h.name, "Host") {
			hosts = append(hosts, h.value)
		}
	}
	if len(hosts) == 0 {
		return nil
	}
	if len(hosts) > 1 {
		return errors.New("more than one Host header")
	}
	host, port, err := parseAuthority(hosts[0], req.port)
	if err != nil {
		return fmt.Errorf("the Host header: %v", err)
	}
	if !strings.EqualFold(strings.TrimSuffix(host, "."), strings.TrimSuffix(req.host, ".")) || port != req.port {
		return fmt.Errorf("the Host header names %s, the request line %s", strconv.QuoteToASCII(truncate(hosts[0])), strconv.QuoteToASCII(truncate(req.authority)))
	}
	return nil
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// hopByHop are the headers that concern the hop to the proxy, not the
// destination: dropped from a forwarded request.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "TE", "Trailer", "Upgrade", "Host"}

// forwardHead is the head a plain request is sent on with: origin-form,
// the Host the target names, the client's other end-to-end headers, and
// Connection: close. The rest of the connection is relayed as it comes,
// to the destination decided on: a second request in it, whatever host
// it names, reaches only that destination, which closes after the first.
func forwardHead(req httpRequest) []byte {
	drop := map[string]bool{}
	for _, h := range hopByHop {
		drop[strings.ToLower(h)] = true
	}
	for _, h := range req.headers {
		if strings.EqualFold(h.name, "Connection") {
			for _, tok := range strings.Split(h.value, ",") {
				drop[strings.ToLower(strings.TrimSpace(tok))] = true
			}
		}
	}
	var b strings.Builder
	b.WriteString(req.method + " " + req.path + " " + req.version + "\r\nHost: " + req.authority + "\r\n")
	for _, h := range req.headers {
		if !drop[strings.ToLower(h.name)] {
			b.WriteString(h.name + ": " + h.value + "\r\n")
		}
	}
	b.WriteString("Connection: close\r\n\r\n")
	return []byte(b.String())
}
