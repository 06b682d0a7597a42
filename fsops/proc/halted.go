package proc

import (
	"bytes"
	"strconv"

	"golang.org/x/sys/unix"
)

// Halted reports whether process pid cannot take work now: stopped or
// traced (state T or t), or dead (Z, X), as this process's /proc shows
// it. A process waiting on a descriptor sleeps (S); one still starting
// runs (R) or waits on a page (D), and gets there. Without a /proc to ask
// it reports false (the caller finds a dead process out by other means).
// The init asks it of an idle tool worker before handing it a call: an
// agent process of the same uid may have stopped it to stall the call.
func Halted(pid int) bool {
	var buf [statBuf]byte
	b, ok := readStatLine(pid, buf[:])
	if !ok {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	switch b[i+2] {
	case 'T', 't', 'Z', 'X', 'x':
		return true
	}
	return false
}

// Parent is the parent of process pid, as this process's /proc shows it;
// false when there is none to read (gone, no /proc).
func Parent(pid int) (int, bool) {
	var buf [statBuf]byte
	b, ok := readStatLine(pid, buf[:])
	if !ok {
		return 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// Descends reports whether pid is ancestor or lies below it, walking the
// parent chain in /proc (bounded): the run host asks it of every caller
// of its broker (is it a process of the run?).
func Descends(pid, ancestor int) bool {
	if pid <= 0 || ancestor <= 0 {
		return false
	}
	for i := 0; i < 256 && pid > 1; i++ {
		if pid == ancestor {
			return true
		}
		next, ok := Parent(pid)
		if !ok {
			return false
		}
		pid = next
	}
	return false
}

// statBuf holds a /proc/PID/stat line: 52 numbers after a name of at most
// 64 bytes.
const statBuf = 1024

// readStatLine reads /proc/PID/stat into buf in one read: the run host
// reads it of every caller's ancestors and the init of its idle worker
// before each call, where os.ReadFile's file (a status, a poller
// registration, a second read) cost more than the read.
func readStatLine(pid int, buf []byte) ([]byte, bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	for err == unix.EINTR {
		n, err = unix.Read(fd, buf)
	}
	if err != nil || n <= 0 || n == len(buf) {
		return nil, false
	}
	return buf[:n], true
}
