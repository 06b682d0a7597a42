package proc

import (
	"time"

	"golang.org/x/sys/unix"
)

// KillTree ends pid and every process below it at once, with no grace:
// for a run that must stop writing now (its disk budget spent), where no
// pid namespace or cgroup ends the whole run in one call. It stops the tree
// first (a stopped process forks no more), in passes until one finds no
// process it had not stopped, and then kills what it stopped. Each process
// is held by a pidfd from the moment it is found, so a pid reused by an
// unrelated process meanwhile is never signalled. pidfd, when >= 0, holds
// pid itself, taken while it was known to be alive (a caller that may
// have reaped it passes one); a tree whose top has ended is not searched,
// since its number may name another process by then.
func KillTree(pid, pidfd int) {
	held := map[int]int{} // pid -> pidfd
	defer func() {
		for _, fd := range held {
			unix.Close(fd)
		}
	}()
	if pidfd >= 0 {
		fd, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return
		}
		held[pid] = fd
		if unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0) != nil {
			return // ended: nothing below it is ours to find by number
		}
	}
	var stop func(p int, table map[int][]int) bool
	stop = func(p int, table map[int][]int) bool {
		found := false
		if _, ok := held[p]; !ok {
			fd, err := unix.PidfdOpen(p, 0)
			if err != nil {
				return false // gone
			}
			held[p] = fd
			if unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0) != nil {
				return false // ended before it was stopped
			}
			found = true
		}
		for _, c := range children(p, table) {
			if stop(c, table) {
				found = true
			}
		}
		return found
	}
	// A pass that finds nothing new ends the search only once every
	// process held has really stopped: SIGSTOP takes effect on the way
	// back to user space, and a fork in progress when it was sent still
	// makes its child, which the next pass must find.
	for pass := 0; pass < 256; pass++ {
		var table map[int][]int
		if !childrenFiles() {
			table = ScanParents()
		}
		if !stop(pid, table) && pass > 0 && allStopped(held) {
			break
		}
		if pass > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	for _, fd := range held {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
}

// KillGroup sends SIGKILL to every process of process group pgid: what a
// short-lived child started in a session of its own (Setsid) left behind.
func KillGroup(pgid int) {
	if pgid > 1 {
		_ = unix.Kill(-pgid, unix.SIGKILL)
	}
}

// allStopped reports whether every process held is stopped, or has ended:
// none of them can fork any more.
func allStopped(held map[int]int) bool {
	for p := range held {
		st, ok := readStat(p)
		if ok && st.state != 'T' && st.state != 't' && st.state != 'Z' && st.state != 'X' {
			return false
		}
	}
	return true
}

// SignalDescendants sends sig to every process below pid, each one's
// children read before it is signalled (a process killed first would hand
// its children on to its subreaper). It reads only pid's own subtree from
// the children files, not all of /proc (a host of many processes made
// every iso landlock run's end scan them all, more than once); without
// those files it falls back to one scan.
func SignalDescendants(pid int, sig unix.Signal) {
	var table map[int][]int
	if !childrenFiles() {
		table = ScanParents()
	}
	seen := map[int]bool{pid: true}
	for _, c := range children(pid, table) {
		signalDescending(c, sig, table, seen)
	}
}

// signalDescending sends sig to pid and everything below it, reading a
// process's children before signalling it.
func signalDescending(pid int, sig unix.Signal, table map[int][]int, seen map[int]bool) {
	if seen[pid] {
		return
	}
	seen[pid] = true
	kids := children(pid, table)
	_ = unix.Kill(pid, sig)
	for _, k := range kids {
		signalDescending(k, sig, table, seen)
	}
}
