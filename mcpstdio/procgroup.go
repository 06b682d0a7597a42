package mcpstdio

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// member is one process of a process group, read from /proc.
type member struct {
	pid   int
	ppid  int
	state byte // 'R', 'S', 'Z', ...
}

// groupMembers lists the processes whose process group is pgid.
func groupMembers(pgid int) []member {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var out []member
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ..."; comm may hold spaces and
		// parentheses, so parse after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		pg, _ := strconv.Atoi(string(f[2]))
		if pg == pgid {
			out = append(out, member{pid: pid, ppid: ppid, state: f[0][0]})
		}
	}
	return out
}

// GroupAlive reports whether any process of group pgid is still running
// (zombies do not count: they are dead and only wait to be reaped).
func GroupAlive(pgid int) bool {
	for _, m := range groupMembers(pgid) {
		if m.state != 'Z' && m.state != 'X' {
			return true
		}
	}
	return false
}

// becomeSubreaper makes this process the reaper of its orphaned
// descendants, so that a server's grandchildren, orphaned when the server
// dies, are reparented here and can be reaped instead of lingering as
// zombies under an init that may never reap them.
func becomeSubreaper() {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) // best effort: reaping then relies on init
}

// reapGroup reaps, without blocking, every exited child of ours in group
// pgid (the leader excepted: os/exec reaps it).
func reapGroup(pgid int) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-pgid, &ws, unix.WNOHANG, nil)
		if err != nil || pid <= 0 {
			return
		}
	}
}

// killGroup ends process group pgid: SIGTERM, up to grace for the group to
// exit, then SIGKILL, then reaps what it can until no member is left (or
// five seconds passed: a member that left the group cannot be waited for).
// The group leader must not have been reaped yet: its zombie keeps the
// pgid from being reused, so the signals cannot reach an unrelated group.
func killGroup(pgid int, grace time.Duration) {
	_ = unix.Kill(-pgid, unix.SIGTERM)
	deadline := time.Now().Add(grace)
	for GroupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	_ = unix.Kill(-pgid, unix.SIGKILL)
}

// waitGroupGone reaps the rest of group pgid after its leader was reaped.
func waitGroupGone(pgid int) {
	deadline := time.Now().Add(5 * time.Second)
	self := os.Getpid()
	for time.Now().Before(deadline) {
		reapGroup(pgid)
		left := false
		for _, m := range groupMembers(pgid) {
			// A zombie whose parent is not us is init's to reap.
			if m.state != 'Z' || m.ppid == self {
				left = true
			}
		}
		if !left {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
