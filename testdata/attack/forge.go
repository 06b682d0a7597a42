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
// 3): it waits for a process of the run running TOOL, reads its
// CTX_BROKERED value from /proc/PID/environ (once the call's token), and
// tries every way to report for that call: a report naming the value on
// the broker socket, the call's channel taken from /proc/PID/fd/3 or by
// pidfd_getfd. The test then checks the call's event carries none of the
// forged errno, layer or detail.
func forgeReport(tool string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if pid, value, ok := findBrokered(tool); ok {
			fmt.Println("found=yes")
			forgeFor(pid, value)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	fmt.Println("found=no")
}

// findBrokered is a process running tool with CTX_BROKERED set, and that
// value.
func findBrokered(tool string) (int, string, bool) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if !strings.HasPrefix(string(cmd), tool+"\x00") {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "CTX_BROKERED="); ok {
				return pid, v, true
			}
		}
	}
	return 0, "", false
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
