package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// forgeReport speaks for another process's tool call (issue 30, finding
// 3): it waits for a tool worker of the run running a call whose child's
// command line holds WORD (shell.exec's command), and tries every way to
// report for that call: a report on the broker socket, the worker's
// socket to the init (where its report goes) taken from /proc/PID/fd/3 or
// by pidfd_getfd. The test then checks the call's event carries none of
// the forged errno, layer or detail.
func forgeReport(word string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if pid, value, ok := findBrokered(word); ok {
			fmt.Println("found=yes")
			forgeFor(pid, value)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	fmt.Println("found=no")
}

// findBrokered is a tool worker running a call whose child's command line
// holds word. (A forger reading its /proc/PID/environ finds nothing of the
// call: the worker took its environment from its order, after its start.)
func findBrokered(word string) (int, string, bool) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.HasPrefix(string(cmd), "ctx-tool-worker\x00") && hasChild(pid, word) {
			return pid, "", true
		}
	}
	return 0, "", false
}

// hasChild reports whether a child of pid runs a program whose command
// line holds word (shell.exec's /bin/sh -c COMMAND).
func hasChild(pid int, word string) bool {
	kids, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	for _, k := range strings.Fields(string(kids)) {
		cmd, _ := os.ReadFile("/proc/" + k + "/cmdline")
		if strings.Contains(string(cmd), word) {
			return true
		}
	}
	return false
}

// forgeFor sends the forged report every way it can, for pid's call.
func forgeFor(pid int, value string) {
	forged := `"errno":"EFORGED","layer":"forged\u0085layer","detail":"forged \u202edetail\u009b"`
	msg := fmt.Sprintf(`{"tool":"","args":null,"env":null,"cwd":"","report":{"token":%q,%s}}`, value, forged)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		if err = unix.Connect(fd, &unix.SockaddrUnix{Name: "/mnt/proc/broker.sock"}); err == nil {
			if err = unix.Sendmsg(fd, []byte(msg), nil, nil, 0); err == nil {
				buf := make([]byte, 4096)
				n, _, _, _, rerr := unix.Recvmsg(fd, buf, nil, 0)
				if rerr == nil && !strings.Contains(string(buf[:n]), `"exit":0`) && strings.Contains(string(buf[:n]), "exit") {
					err = unix.EACCES
				} else {
					err = rerr
				}
			}
		}
		unix.Close(fd)
	}
	report("sockreport", err)
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/3", os.O_RDWR, 0)
	if err == nil {
		f.Close()
	}
	report("openfd", err)
	pfd, err := unix.PidfdOpen(pid, 0)
	if err == nil {
		var got int
		got, err = unix.PidfdGetfd(pfd, 3, 0)
		if err == nil {
			unix.Sendmsg(got, []byte(`{"tool":"","args":null,"env":null,"cwd":"","report":{`+forged+`}}`), nil, nil, 0)
			unix.Close(got)
		}
		unix.Close(pfd)
	}
	report("getfd", err)
}
