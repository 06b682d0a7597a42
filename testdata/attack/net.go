package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The network tests' clients and servers (testdata/script/network_*.txtar).
// Servers run on the test's side, in a private network namespace where
// documentation addresses are the loopback's; clients run inside the
// sandbox, proxy-aware (the proxy variables) or not.

// netServe serves TCP on ADDR until killed: an HTTP request gets 200 and
// TEXT, anything else is echoed back. READYFILE is written once it listens.
// A TEXT of "keepalive BODY" answers every request of a connection with
// BODY and keeps the connection open even after the client is done, as
// a server holding an idle keep-alive connection may.
func netServe(addr, text, ready string) {
	body, keepAlive := strings.CutPrefix(text, "keepalive ")
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	os.WriteFile(ready+".tmp", []byte(l.Addr().String()), 0o644)
	os.Rename(ready+".tmp", ready)
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		if keepAlive {
			go serveKeepAlive(c, body)
			continue
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			first, err := br.Peek(4)
			if err == nil && string(first) == "GET " {
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(text)+1, text+"\n")
				return
			}
			io.Copy(c, br)
		}()
	}
}

// serveKeepAlive answers each HTTP request on c with 200 and body, and
// never closes c: it stays open until the server is killed.
func serveKeepAlive(c net.Conn, body string) {
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			select {} // the client is done; this side stays open
		}
		if line == "\r\n" {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body)+1, body+"\n")
		}
	}
}

// netGet fetches URL, through the proxy variables unless direct, and
// prints get=STATUS and the body's first line, or get=error.
func netGet(rawURL string, direct bool) {
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if direct {
		tr.Proxy = nil
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := client.Get(rawURL)
	if err != nil {
		fmt.Printf("get=error err=%q\n", err.Error())
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	line, _, _ := strings.Cut(string(b), "\n")
	fmt.Printf("get=%d body=%q\n", resp.StatusCode, line)
}

// netResolve looks NAME up with the system's resolver (resolv.conf) and
// prints the answer and whether it came within a second.
func netResolve(name string) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	fast := time.Since(start) < time.Second
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		fmt.Printf("resolve=%s\n", strings.Join(addrs, ","))
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		fmt.Println("resolve=nxdomain")
	default:
		fmt.Printf("resolve=error err=%q\n", err.Error())
	}
	fmt.Printf("resolve_fast=%v\n", fast)
}

// proxyAddr is the host:port of the proxy variable key.
func proxyAddr(key string) string {
	u, err := url.Parse(os.Getenv(key))
	if err != nil || u.Host == "" {
		fmt.Printf("proxy=none (%s=%q)\n", key, os.Getenv(key))
		os.Exit(1)
	}
	return u.Host
}

// netSOCKS asks the SOCKS5 proxy of ALL_PROXY for HOST:PORT by name and
// sends an HTTP GET; it prints socks=ok and the status line, or the reply
// code the proxy refused with.
func netSOCKS(target string) {
	host, portText, _ := net.SplitHostPort(target)
	port, _ := strconv.Atoi(portText)
	c, err := net.DialTimeout("tcp", proxyAddr("ALL_PROXY"), 5*time.Second)
	if err != nil {
		fmt.Printf("socks=error err=%q\n", err.Error())
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := []byte{5, 1, 0, 5, 1, 0, 3, byte(len(host))}
	req = append(append(req, host...), byte(port>>8), byte(port))
	c.Write(req)
	reply := make([]byte, 2+10)
	if _, err := io.ReadFull(c, reply); err != nil {
		fmt.Printf("socks=error err=%q\n", err.Error())
		return
	}
	if reply[3] != 0 {
		fmt.Printf("socks=refused code=%d\n", reply[3])
		return
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	status, _ := bufio.NewReader(c).ReadString('\n')
	fmt.Printf("socks=ok status=%q\n", strings.TrimSpace(status))
}

// netHold opens a relay to HOST:PORT (an echo server) through the
// HTTP_PROXY's CONNECT, checks it echoes, writes HELD, waits for GO to
// exist and then says how long the relay stayed open after it appeared.
func netHold(target, held, goFile string) {
	c, err := net.DialTimeout("tcp", proxyAddr("HTTP_PROXY"), 5*time.Second)
	if err != nil {
		fmt.Printf("hold=error err=%q\n", err.Error())
		return
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	status, _ := br.ReadString('\n')
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			break
		}
	}
	fmt.Fprintf(c, "ping\n")
	echo, err := br.ReadString('\n')
	if err != nil || echo != "ping\n" {
		fmt.Printf("hold=error status=%q echo=%q err=%v\n", strings.TrimSpace(status), echo, err)
		return
	}
	os.WriteFile(held, nil, 0o644)
	// GO is looked for by listing its directory: a lookup that failed
	// once may keep failing under an idmapped workspace in a mount
	// namespace of the test's (a cached negative entry), a listing not.
	dir, name := filepath.Split(goFile)
	for deadline := time.Now().Add(30 * time.Second); !inDir(dir, name); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			fmt.Println("hold=no-go")
			return
		}
	}
	start := time.Now()
	c.SetReadDeadline(start.Add(10 * time.Second))
	_, err = br.ReadString('\n')
	ms := time.Since(start).Milliseconds()
	fmt.Printf("hold=closed within_1s=%v\n", ms < 1000 && !isTimeout(err))
}

// inDir reports whether dir lists name.
func inDir(dir, name string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == name {
			return true
		}
	}
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
