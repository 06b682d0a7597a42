package sandbox

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// iso landlock's egress: Landlock lets the run connect over TCP to the run
// host's proxy port and nowhere else, and bind nothing; the seccomp filter
// keeps every socket but TCP (and unix) from being made, and refuses a TCP
// Fast Open send, which connects without asking Landlock.
func TestLandlockConnectPortOnly(t *testing.T) {
	abi := requireLandlock(t)
	if abi < 4 {
		t.Skipf("Landlock ABI %d has no TCP rules (4+)", abi)
	}
	allowed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer allowed.Close()
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for {
			c, err := allowed.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	arg := strconv.Itoa(allowed.Addr().(*net.TCPAddr).Port) + " " + strconv.Itoa(other.Addr().(*net.TCPAddr).Port)
	got := runLandlockChild(t, "tcp-port", t.TempDir(), arg)
	if !strings.Contains(got["applied"], " tcp=connect:") {
		t.Errorf("summary %q", got["applied"])
	}
	landlockExpectReports(t, got, map[string]string{
		"connect-allowed":  "ok",
		"connect-other":    "EACCES",
		"fastopen-other":   "EPERM", // the filter's: Landlock does not see it
		"fastopen-msg":     "EPERM",
		"bind-tcp":         "EACCES",
		"socket-udp":       "EPERM",
		"socket-raw":       "EPERM",
		"socket-sctp":      "EPERM",
		"socket-tcp6":      "ok",
		"socket-unix":      "ok",
		"socket-netlink":   "EPERM",
		"connect6-other":   "EACCES",
		"connect-mapped-6": "EACCES",
	})
	landlockExpectNoAccept(t, other)
}

// landlockChildTCPPort is that case's child: the walls of an iso landlock
// run with egress (Landlock's port rule, the TCP-only filter), then the
// attempts.
func landlockChildTCPPort(t *testing.T, arg string) {
	allowedText, otherText, _ := strings.Cut(arg, " ")
	allowed, _ := strconv.Atoi(allowedText)
	other, _ := strconv.Atoi(otherText)
	landlockApplyInChild(t, LandlockPolicy{DenyTCP: true, ConnectTCP: uint16(allowed)})
	if err := InstallSeccompWith(SeccompOptions{TCPOnly: true}); err != nil {
		t.Fatal(err)
	}
	loop := [4]byte{127, 0, 0, 1}
	tcp := func() int {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	fd := tcp()
	landlockResult("connect-allowed", unix.Connect(fd, &unix.SockaddrInet4{Port: allowed, Addr: loop}))
	unix.Close(fd)
	fd = tcp()
	landlockResult("connect-other", unix.Connect(fd, &unix.SockaddrInet4{Port: other, Addr: loop}))
	unix.Close(fd)
	fd = tcp()
	landlockResult("fastopen-other", unix.Sendto(fd, []byte("GET / HTTP/1.0\r\n\r\n"), unix.MSG_FASTOPEN, &unix.SockaddrInet4{Port: other, Addr: loop}))
	unix.Close(fd)
	fd = tcp()
	landlockResult("fastopen-msg", unix.Sendmsg(fd, []byte("x"), nil, &unix.SockaddrInet4{Port: other, Addr: loop}, unix.MSG_FASTOPEN))
	unix.Close(fd)
	fd = tcp()
	landlockResult("bind-tcp", unix.Bind(fd, &unix.SockaddrInet4{Addr: loop}))
	unix.Close(fd)
	socket := func(key string, domain, typ, proto int) {
		fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
		if err == nil {
			unix.Close(fd)
		}
		landlockResult(key, err)
	}
	socket("socket-udp", unix.AF_INET, unix.SOCK_DGRAM, 0)
	socket("socket-raw", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	socket("socket-sctp", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	socket("socket-tcp6", unix.AF_INET6, unix.SOCK_STREAM, 0)
	socket("socket-unix", unix.AF_UNIX, unix.SOCK_STREAM, 0)
	socket("socket-netlink", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	fd6, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	landlockResult("connect6-other", unix.Connect(fd6, &unix.SockaddrInet6{Port: other, Addr: [16]byte{15: 1}}))
	unix.Close(fd6)
	fd6, _ = unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	landlockResult("connect-mapped-6", unix.Connect(fd6, &unix.SockaddrInet6{Port: other, Addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}}))
	unix.Close(fd6)
}
