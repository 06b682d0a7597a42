package mcpstdio

import (
	"bytes"
	"os"
	"strconv"

	"ctx/fsops/proc"
)

// GroupAlive reports whether a process of group pgid still runs.
func GroupAlive(pgid int) bool { return proc.GroupAlive(pgid) }

// groupMembers lists the /proc/PID/stat lines of group pgid, for messages.
func groupMembers(pgid int) []string {
	names, _ := os.ReadDir("/proc")
	var out []string
	for _, n := range names {
		if _, err := strconv.Atoi(n.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n.Name() + "/stat")
		if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 {
			if f := bytes.Fields(b[i+1:]); len(f) > 2 && string(f[2]) == strconv.Itoa(pgid) {
				out = append(out, string(bytes.TrimSpace(b)))
			}
		}
	}
	return out
}
