package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Attacks on other runs of the same uid, and on the person who started
// this one (DESIGN §16 rule 12). An agent in iso landlock shares the host's
// network namespace, so /proc/net/unix lists every socket of the host by
// path: the terminals and brokers of other runs.

// unixSockets lists the bound paths in /proc/net/unix ending in suffix.
func unixSockets(suffix string) []string {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		report("proc-net-unix", err)
		return nil
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		p := fields[len(fields)-1]
		if strings.HasPrefix(p, "/") && strings.HasSuffix(p, suffix) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// listed prints whether target is among the sockets /proc/net/unix
// lists with suffix: what an agent finds there it can aim at. Only the
// test's own target is attacked, not every run of the host.
func listed(target, suffix string) []string {
	for _, s := range unixSockets(suffix) {
		if s == target {
			fmt.Println("listed=yes")
			return []string{s}
		}
	}
	fmt.Println("listed=no")
	return nil
}

// terminals attaches to the terminal socket target, found in
// /proc/net/unix, and types text (a newline added), once as the seed's
// protocol has it and once with a made-up secret line first. It prints
// terminal=ok when the terminal took the connection without refusing it,
// terminal=refused otherwise.
func terminals(target, text string) {
	socks := listed(target, "/main.sock")
	fake := "secret " + strings.Repeat("0", 64) + "\n"
	for _, s := range socks {
		for _, hello := range []string{"attach\n", fake + "attach\n"} {
			conn, err := net.DialTimeout("unix", s, 2*time.Second)
			if err != nil {
				report("terminal-connect", err)
				continue
			}
			conn.Write([]byte(hello + text + "\n"))
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			b := make([]byte, 4096)
			n, _ := conn.Read(b)
			if bytes.Contains(b[:n], []byte("refused")) || bytes.HasPrefix(b[:n], []byte("ctxterm:")) {
				fmt.Println("terminal=refused")
			} else {
				fmt.Println("terminal=ok")
			}
			conn.Close()
		}
	}
}

// joinBrokers asks the broker args[0] to start args[1:] in its run (a
// join, as ctx agent start for a running agent sends it), with this
// process's standard descriptors, and prints the answer. A socket path too
// long for an address (a deep tree's run directory, bound through a
// directory descriptor and listed so) is reached the same way.
// With toolArgs (call), it asks for a call of the tool args[1] instead.
func joinBrokers(args, toolArgs []string) {
	req, _ := json.Marshal(map[string]any{"tool": "", "join": map[string]any{"argv": args[1:]}})
	if toolArgs != nil {
		req, _ = json.Marshal(map[string]any{"tool": args[1], "args": toolArgs, "cwd": "/workspace", "env": []string{}})
	}
	listed(args[0], "/broker.sock")
	for _, s := range args[:1] {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			err = connectLong(fd, s)
		}
		if err == nil {
			err = unix.Sendmsg(fd, req, unix.UnixRights(0, 1, 2), nil, 0)
		}
		if err != nil {
			report("join", err)
			continue
		}
		b := make([]byte, 65536)
		n, _, _ := unix.Recvfrom(fd, b, 0)
		fmt.Printf("%s=%s\n", map[bool]string{true: "call", false: "join"}[toolArgs != nil], bytes.TrimSpace(b[:max(n, 0)]))
		unix.Close(fd)
	}
}

// connectLong connects fd to the socket at path, through a descriptor of
// its directory when path is too long for an address.
func connectLong(fd int, path string) error {
	if len(path) < 108 {
		return unix.Connect(fd, &unix.SockaddrUnix{Name: path})
	}
	dir, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: fmt.Sprintf("/proc/self/fd/%d/%s", dir, filepath.Base(path))})
}

// stall tries to starve the person who started this run: it stops (SIGSTOP)
// every warm tool worker it sees, and holds 64 connections to its own
// broker that never send a request, opening a new one for each the broker
// drops. It writes marker once both are in place, and goes on until it is
// killed.
func stall(marker string) {
	sock := os.Getenv("CTX_BROKER")
	if sock == "" {
		sock = "/mnt/proc/broker.sock"
	}
	dial := func() int {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			if err = connectLong(fd, sock); err != nil {
				unix.Close(fd)
				return -1
			}
		}
		return fd
	}
	conns := make([]int, 64)
	for i := range conns {
		conns[i] = dial()
	}
	stopped := stopWorkers()
	fmt.Printf("stall-conns=%d workers-stopped=%d\n", len(conns), stopped)
	os.WriteFile(marker, []byte("stalled\n"), 0o644)
	for {
		time.Sleep(100 * time.Millisecond)
		stopWorkers()
		for i, fd := range conns {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if fd < 0 {
				conns[i] = dial()
				continue
			}
			if n, _ := unix.Poll(pfd, 0); n > 0 {
				unix.Close(fd) // dropped (or answered): a new one instead
				conns[i] = dial()
			}
		}
	}
}

// stopWorkers sends SIGSTOP to every process whose argv[0] is
// ctx-tool-worker, and returns how many.
func stopWorkers() int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := bytes.Cut(b, []byte{0})
		if filepath.Base(string(argv0)) == "ctx-tool-worker" && unix.Kill(pid, unix.SIGSTOP) == nil {
			n++
		}
	}
	return n
}
